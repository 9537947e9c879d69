// Command cvodecode decodes every manifest file of a payload with library-go's
// manifest.ParseManifests, the parser the Cluster Version Operator loads payloads with, and
// prints what it decoded, so that minicvo's loader can be compared with it object by object
// (tests/it/load_decoder_differential.rs).
//
// Usage: cvodecode [-release-image I] [-profile P] PAYLOAD...
//
// Files are those the CVO reads: manifests/ (rendered first as a Go text/template named
// "manifest" with .ReleaseImage and .ClusterProfile, as the CVO renders them) then
// release-manifests/, each sorted by name, no recursion, only .yaml, .yml and .json. A payload
// without those directories is read as a bare release-manifests/.
//
// Output on stdout, one JSON object per payload and line:
//
//	{"payload": "...", "files": [{"file": "release-manifests/x.yaml",
//	  "objects": [{...}, ...]}, {"file": "...", "error": "..."}]}
//
// Each object is the decoded Unstructured's content, encoded by encoding/json (map keys
// sorted).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/openshift/library-go/pkg/manifest"
)

type fileResult struct {
	File    string           `json:"file"`
	Objects []map[string]any `json:"objects,omitempty"`
	Error   string           `json:"error,omitempty"`
}

type payloadResult struct {
	Payload string       `json:"payload"`
	Files   []fileResult `json:"files"`
}

type renderData struct {
	ReleaseImage   string
	ClusterProfile string
}

func listDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		switch filepath.Ext(e.Name()) {
		case ".yaml", ".yml", ".json":
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

func decode(path, shown string, data []byte) fileResult {
	ms, err := manifest.ParseManifests(bytes.NewReader(data))
	if err != nil {
		return fileResult{File: shown, Error: err.Error()}
	}
	out := fileResult{File: shown, Objects: []map[string]any{}}
	for _, m := range ms {
		out.Objects = append(out.Objects, m.Obj.Object)
	}
	return out
}

func load(root string, d renderData) (payloadResult, error) {
	res := payloadResult{Payload: root}
	dirs := []string{"manifests", "release-manifests"}
	if _, err := os.Stat(filepath.Join(root, "release-manifests")); err != nil {
		if _, err := os.Stat(filepath.Join(root, "manifests")); err != nil {
			dirs = []string{""}
		}
	}
	for _, dir := range dirs {
		full := filepath.Join(root, dir)
		if _, err := os.Stat(full); err != nil {
			continue
		}
		names, err := listDir(full)
		if err != nil {
			return res, err
		}
		for _, name := range names {
			path := filepath.Join(full, name)
			shown := strings.TrimPrefix(filepath.Join(dir, name), "/")
			data, err := os.ReadFile(path)
			if err != nil {
				return res, err
			}
			if dir == "manifests" {
				t, err := template.New("manifest").Parse(string(data))
				if err != nil {
					res.Files = append(res.Files, fileResult{File: shown, Error: err.Error()})
					continue
				}
				var buf bytes.Buffer
				if err := t.Execute(&buf, d); err != nil {
					res.Files = append(res.Files, fileResult{File: shown, Error: err.Error()})
					continue
				}
				data = buf.Bytes()
			}
			res.Files = append(res.Files, decode(path, shown, data))
		}
	}
	return res, nil
}

func main() {
	image := flag.String("release-image", "", "value of {{.ReleaseImage}}")
	profile := flag.String("profile", "self-managed-high-availability", "value of {{.ClusterProfile}}")
	flag.Parse()
	enc := json.NewEncoder(os.Stdout)
	for _, root := range flag.Args() {
		res, err := load(root, renderData{ReleaseImage: *image, ClusterProfile: *profile})
		if err != nil {
			fmt.Fprintf(os.Stderr, "cvodecode: %s: %v\n", root, err)
			os.Exit(1)
		}
		if err := enc.Encode(res); err != nil {
			fmt.Fprintf(os.Stderr, "cvodecode: %v\n", err)
			os.Exit(1)
		}
	}
}
