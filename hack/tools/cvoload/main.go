// Command cvoload loads a release payload directory the way the Cluster Version Operator's
// LoadUpdate does, and reports how long it took and how much it allocated. It is the baseline
// that hack/bench.sh compares minicvo against.
//
// What it does, as the CVO (cluster-version-operator pkg/payload LoadUpdate with library-go
// pkg/manifest ParseManifests and Manifest.Include):
//
//   - read release-metadata (JSON, kind cincinnati-metadata-v0, SemVer version) and
//     image-references when present;
//   - list manifests/ then release-manifests/ with os.ReadDir (sorted by name), no recursion,
//     only .yaml, .yml and .json, skipping release-metadata and image-references;
//   - render manifests/ files as Go templates ({{.ReleaseImage}}, {{.ClusterProfile}});
//   - decode each file with k8s.io/apimachinery's yaml.NewYAMLOrJSONDecoder(r, 1024) into a
//     Manifest whose UnmarshalJSON keeps the raw JSON and decodes it into
//     unstructured.Unstructured with client-go's scheme.Codecs.UniversalDecoder();
//   - skip empty and null documents, require kind and metadata.name, reject a duplicate
//     group/kind/namespace/name within one file;
//   - apply the load-time inclusion filter (exclude id, feature set, feature gates, major
//     version, profile annotation);
//   - hash the raw bytes of every included manifest with FNV-64 (the payload's ManifestHash).
//
// Differences from the CVO, all in the lenient direction: a missing manifests/,
// release-manifests/, release-metadata or image-references is not an error (the corpus payloads
// ship only release-manifests/), and without release-metadata the major-version filter is off.
//
// Output: one `iteration=i ...` line per load and one `summary ...` line, as key=value pairs.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

const (
	cvoManifestDir     = "manifests"
	releaseManifestDir = "release-manifests"
	releaseMetadata    = "release-metadata"
	imageReferences    = "image-references"
)

var knownFeatureSets = map[string]bool{
	"Default": true, "TechPreviewNoUpgrade": true, "DevPreviewNoUpgrade": true,
	"CustomNoUpgrade": true, "OKD": true,
}

// resourceID is the identity the CVO checks for duplicates within a file.
type resourceID struct {
	Group, Kind, Name, Namespace string
}

// manifest is library-go's Manifest: raw JSON, GVK and the unstructured object.
type manifest struct {
	OriginalFilename string
	id               resourceID
	Raw              []byte
	GVK              schema.GroupVersionKind
	Obj              *unstructured.Unstructured
}

// UnmarshalJSON keeps the raw document and decodes it with client-go's universal decoder
// into an Unstructured, as library-go does.
func (m *manifest) UnmarshalJSON(in []byte) error {
	if bytes.Equal(in, []byte("null")) {
		m.Raw = nil
		return nil
	}
	m.Raw = append(m.Raw[0:0], in...)
	obj, _, err := scheme.Codecs.UniversalDecoder().Decode(in, nil, &unstructured.Unstructured{})
	if err != nil {
		return fmt.Errorf("unable to decode manifest: %w", err)
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("expected manifest to decode into *unstructured.Unstructured, got %T", obj)
	}
	m.Obj = u
	m.GVK = u.GroupVersionKind()
	m.id = resourceID{Group: m.GVK.Group, Kind: m.GVK.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
	if m.id.Kind == "" || m.id.Name == "" {
		return fmt.Errorf("resource with fields %+v must contain kubernetes required fields kind and name", m.id)
	}
	return nil
}

// parseManifests is library-go's ParseManifests.
func parseManifests(r io.Reader) ([]manifest, error) {
	seen := map[resourceID]bool{}
	d := yaml.NewYAMLOrJSONDecoder(r, 1024)
	var out []manifest
	for {
		m := manifest{}
		if err := d.Decode(&m); err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, fmt.Errorf("error parsing: %w", err)
		}
		m.Raw = bytes.TrimSpace(m.Raw)
		if len(m.Raw) == 0 || bytes.Equal(m.Raw, []byte("null")) {
			continue
		}
		if seen[m.id] {
			return out, fmt.Errorf("duplicate resource: (%+v)", m.id)
		}
		seen[m.id] = true
		out = append(out, m)
	}
}

// filters are the load-time inclusion settings.
type filters struct {
	exclude      string
	featureSet   string
	profile      string
	featureGates map[string]bool // nil: filter off
}

func (f *filters) include(m *manifest, major *uint64) error {
	ann := m.Obj.GetAnnotations()
	if ann == nil {
		return errors.New("no annotations")
	}
	if v := ann["exclude.release.openshift.io/"+f.exclude]; v == "true" {
		return fmt.Errorf("excluded by id %s", f.exclude)
	}
	fsv, hasFS := ann["release.openshift.io/feature-set"]
	fgv, hasFG := ann["release.openshift.io/feature-gate"]
	if f.featureGates != nil && hasFS && hasFG {
		return errors.New("both feature set and feature gate annotations are present")
	}
	if hasFS {
		required := f.featureSet
		if required == "" {
			required = "Default"
		}
		found := false
		for _, s := range strings.Split(fsv, ",") {
			if !knownFeatureSets[s] {
				return fmt.Errorf("unrecognized feature set %q", s)
			}
			found = found || s == required
		}
		if !found {
			return fmt.Errorf("%q is required, and feature-set=%s", required, fsv)
		}
	}
	if f.featureGates != nil && hasFG {
		for _, req := range strings.Split(fgv, ",") {
			req = strings.TrimSpace(req)
			switch {
			case req == "":
			case strings.HasPrefix(req, "-"):
				if f.featureGates[req[1:]] {
					return fmt.Errorf("feature gate %s is enabled", req[1:])
				}
			case !f.featureGates[req]:
				return fmt.Errorf("feature gate %s is required", req)
			}
		}
	}
	if mv, ok := ann["release.openshift.io/major-version"]; ok && major != nil {
		if err := checkMajorVersion(m.GVK, *major, mv); err != nil {
			return err
		}
	}
	key := "include.release.openshift.io/" + f.profile
	if v, ok := ann[key]; ok && v != "true" {
		return fmt.Errorf("unrecognized value %s=%s", key, v)
	} else if !ok {
		return fmt.Errorf("%s unset", key)
	}
	return nil
}

func checkMajorVersion(gvk schema.GroupVersionKind, major uint64, value string) error {
	isGate := gvk.Group == "config.openshift.io" && gvk.Kind == "FeatureGate"
	isCRD := gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition"
	if !isGate && !isCRD {
		return errors.New("major version filtering is only supported for feature gates and custom resources")
	}
	included, excluded := map[uint64]bool{}, map[uint64]bool{}
	for _, req := range strings.Split(value, ",") {
		req = strings.TrimSpace(req)
		if req == "" {
			continue
		}
		target := included
		if strings.HasPrefix(req, "-") {
			target, req = excluded, req[1:]
		}
		v, err := strconv.ParseUint(req, 10, 64)
		if err != nil {
			return fmt.Errorf("invalid major version %q: %w", req, err)
		}
		target[v] = true
	}
	for v := range included {
		if excluded[v] {
			return errors.New("inclusion and exclusion requirements overlap")
		}
	}
	switch {
	case included[major]:
		return nil
	case excluded[major]:
		return fmt.Errorf("major version %d excluded", major)
	case len(included) > 0:
		return fmt.Errorf("major version %d not required", major)
	}
	return nil
}

// update is what LoadUpdate returns, reduced to what the benchmark reports.
type update struct {
	Version      string
	ManifestHash string
	Manifests    []manifest
	Excluded     int
}

func loadMetadata(releaseDir string) (version string, major *uint64, err error) {
	data, err := os.ReadFile(filepath.Join(releaseDir, releaseMetadata))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, nil
	} else if err != nil {
		return "", nil, err
	}
	var meta struct {
		Kind    string `json:"kind"`
		Version string `json:"version"`
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return "", nil, fmt.Errorf("unmarshal Cincinnati metadata: %w", err)
	}
	if meta.Kind != "cincinnati-metadata-v0" || meta.Version == "" {
		return "", nil, fmt.Errorf("bad Cincinnati metadata %+v", meta)
	}
	m, err := strconv.ParseUint(strings.SplitN(meta.Version, ".", 2)[0], 10, 64)
	if err != nil {
		return "", nil, fmt.Errorf("invalid version %q: %w", meta.Version, err)
	}
	if raw, err := os.ReadFile(filepath.Join(releaseDir, imageReferences)); err == nil {
		var is unstructured.Unstructured
		if err := json.Unmarshal(raw, &is.Object); err != nil {
			return "", nil, fmt.Errorf("unmarshal image-references: %w", err)
		}
	}
	return meta.Version, &m, nil
}

func hasManifestExtension(name string) bool {
	switch filepath.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

func loadUpdate(dir, releaseImage string, f *filters) (*update, error) {
	cvoDir := filepath.Join(dir, cvoManifestDir)
	releaseDir := filepath.Join(dir, releaseManifestDir)
	version, major, err := loadMetadata(releaseDir)
	if err != nil {
		return nil, err
	}
	render := func(raw []byte) ([]byte, error) {
		tmpl, err := template.New("manifest").Parse(string(raw))
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		cfg := struct{ ReleaseImage, ClusterProfile string }{releaseImage, f.profile}
		if err := tmpl.Execute(&buf, cfg); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	tasks := []struct {
		dir        string
		preprocess func([]byte) ([]byte, error)
		skip       map[string]bool
	}{
		{cvoDir, render, nil},
		{releaseDir, nil, map[string]bool{releaseMetadata: true, imageReferences: true}},
	}
	u := &update{Version: version}
	var errs []error
	for _, task := range tasks {
		files, err := os.ReadDir(task.dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, err
		}
		for _, file := range files {
			if file.IsDir() || !hasManifestExtension(file.Name()) || task.skip[file.Name()] {
				continue
			}
			raw, err := os.ReadFile(filepath.Join(task.dir, file.Name()))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if task.preprocess != nil {
				if raw, err = task.preprocess(raw); err != nil {
					errs = append(errs, fmt.Errorf("preprocess %s: %w", file.Name(), err))
					continue
				}
			}
			ms, err := parseManifests(bytes.NewReader(raw))
			if err != nil {
				errs = append(errs, fmt.Errorf("parse %s: %w", file.Name(), err))
				continue
			}
			for i := range ms {
				ms[i].OriginalFilename = file.Name()
				if err := f.include(&ms[i], major); err != nil {
					u.Excluded++
					continue
				}
				u.Manifests = append(u.Manifests, ms[i])
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("error loading manifests from %s: %w", dir, err)
	}
	h := fnv.New64()
	for _, m := range u.Manifests {
		h.Write(m.Raw)
	}
	u.ManifestHash = base64.URLEncoding.EncodeToString(h.Sum(nil))
	return u, nil
}

// peakRSSKiB is VmHWM from /proc/self/status.
func peakRSSKiB() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return v
		}
	}
	return -1
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func main() {
	iterations := flag.Int("n", 1, "number of loads in this process")
	profile := flag.String("profile", "self-managed-high-availability", "cluster profile")
	featureSet := flag.String("feature-set", "", "required feature set (empty: Default)")
	exclude := flag.String("exclude", "", "exclude identifier")
	releaseImage := flag.String("release-image", "", "value of {{.ReleaseImage}}")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: cvoload [flags] PAYLOAD_DIR\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	dir := flag.Arg(0)
	f := &filters{exclude: *exclude, featureSet: *featureSet, profile: *profile}

	var times, allocs []float64
	for i := 0; i < *iterations; i++ {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		u, err := loadUpdate(dir, *releaseImage, f)
		elapsed := time.Since(start)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cvoload: %v\n", err)
			os.Exit(1)
		}
		runtime.ReadMemStats(&after)
		ms := float64(elapsed.Microseconds()) / 1000
		alloc := float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20)
		times = append(times, ms)
		allocs = append(allocs, alloc)
		fmt.Printf("iteration=%d manifests=%d excluded=%d elapsed_ms=%.1f alloc_mib=%.1f mallocs=%d hash=%s\n",
			i, len(u.Manifests), u.Excluded, ms, alloc, after.Mallocs-before.Mallocs, u.ManifestHash)
		u = nil
	}
	fmt.Printf("summary tool=cvoload iterations=%d first_ms=%.1f median_ms=%.1f min_ms=%.1f median_alloc_mib=%.1f peak_rss_kib=%d gomaxprocs=%d\n",
		len(times), times[0], median(times), slices.Min(times), median(allocs), peakRSSKiB(), runtime.GOMAXPROCS(0))
}
