// Command standin-operator is the stand-in operator image of the node test plane. Running in a
// pod, it does what an operator does with its own identity and nothing more:
//
//   - reads its ServiceAccount token (again for every request, as client-go does with a
//     projected token) and the cluster CA from the pod's service-account volume, and finds the
//     API server through KUBERNETES_SERVICE_HOST/PORT (in-cluster configuration);
//   - holds a leader Lease in its namespace, renews it every third of its duration and waits
//     while another holder's lease is still valid;
//   - while it leads, writes its ClusterOperator's status: Available=True, Progressing=False,
//     Degraded=False and the version it was given (RELEASE_VERSION) as `operator`;
//   - uses what its pod was given, as an operator reads its configuration: every round (every
//     third of the lease duration) it reads each file of STANDIN_REQUIRE_FILES (a mounted
//     ConfigMap or Secret) and checks that each variable of STANDIN_REQUIRE_ENV is set;
//   - on SIGTERM releases the lease (holder emptied, as client-go's ReleaseOnCancel), keeps
//     running for STANDIN_TERMINATION_DELAY seconds (a terminating pod finishing its work:
//     it still reads its files every round, and sends no request), and exits 0 with
//     "ok: ..." (how often and until when it checked its files) as its termination message;
//   - when a request is denied (401 or 403) logs the request and the server's message, writes
//     it to /dev/termination-log (the pod's status shows it) and exits 3;
//   - when a file it reads is gone or a variable unset, writes "missing: ..." to
//     /dev/termination-log and exits 4.
//
// Environment: STANDIN_CLUSTEROPERATOR (required), RELEASE_VERSION (required), STANDIN_LEASE
// (default: the ClusterOperator's name + "-lock"), STANDIN_LEASE_DURATION (seconds, default 3),
// STANDIN_REQUIRE_FILES and STANDIN_REQUIRE_ENV (comma-separated, default none),
// STANDIN_TERMINATION_DELAY (seconds, default 0), POD_NAME (the holder identity, default the
// host name), STANDIN_SA_DIR (default /var/run/secrets/kubernetes.io/serviceaccount).
// Arguments are ignored, so a payload's Deployment keeps its own. Logs go to stderr, one line
// per event.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const microTime = "2006-01-02T15:04:05.000000Z07:00"

// deniedError is a 401 or 403 from the API server: the stand-in's identity lost a right.
type deniedError struct {
	verb, path string
	code       int
	message    string
}

func (e *deniedError) Error() string {
	return fmt.Sprintf("denied: %s %s: %d: %s", e.verb, e.path, e.code, e.message)
}

type client struct {
	base  string
	saDir string
	http  *http.Client
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s standin: %s\n", time.Now().UTC().Format(microTime), fmt.Sprintf(format, args...))
}

func fail(format string, args ...any) {
	logf(format, args...)
	os.Exit(2)
}

func newClient(saDir string) (*client, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set (in-cluster configuration)")
	}
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s/ca.crt holds no certificate", saDir)
	}
	return &client{
		base:  "https://" + net.JoinHostPort(host, port),
		saDir: saDir,
		http: &http.Client{
			Timeout:   5 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		},
	}, nil
}

// do sends one request as the pod's ServiceAccount. It returns the status code and body; a 401
// or 403 is a *deniedError.
func (c *client) do(ctx context.Context, verb, path string, body any) (int, []byte, error) {
	token, err := os.ReadFile(c.saDir + "/token")
	if err != nil {
		return 0, nil, err
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, verb, c.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "minicvo-standin-operator")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		var st struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(out, &st)
		return resp.StatusCode, out, &deniedError{verb, path, resp.StatusCode, st.Message}
	}
	return resp.StatusCode, out, nil
}

type standin struct {
	c         *client
	files     []string
	env       []string
	checks    int
	lastCheck time.Time
	namespace string
	operator  string
	version   string
	lease     string
	identity  string
	duration  time.Duration
	leading   bool
	waitingOn string
	reported  bool
}

func (s *standin) leasePath() string {
	return "/apis/coordination.k8s.io/v1/namespaces/" + s.namespace + "/leases/" + s.lease
}

// tryLease acquires or renews the lease. It returns whether this pod leads afterwards.
func (s *standin) tryLease(ctx context.Context) (bool, error) {
	now := time.Now().UTC()
	secs := int(s.duration / time.Second)
	code, body, err := s.c.do(ctx, "GET", s.leasePath(), nil)
	if err != nil {
		return false, err
	}
	if code == http.StatusNotFound {
		lease := map[string]any{
			"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
			"metadata": map[string]any{"name": s.lease, "namespace": s.namespace},
			"spec": map[string]any{
				"holderIdentity": s.identity, "leaseDurationSeconds": secs,
				"acquireTime": now.Format(microTime), "renewTime": now.Format(microTime),
				"leaseTransitions": 0,
			},
		}
		code, _, err = s.c.do(ctx, "POST", "/apis/coordination.k8s.io/v1/namespaces/"+s.namespace+"/leases", lease)
		if err != nil {
			return false, err
		}
		if code == http.StatusConflict {
			return false, nil
		}
		if code != http.StatusCreated {
			return false, errOr(nil, "create lease", code)
		}
		logf("acquired lease %s/%s (created it)", s.namespace, s.lease)
		s.waitingOn = ""
		return true, nil
	}
	if code != http.StatusOK {
		return false, errOr(nil, "get lease", code)
	}
	var lease map[string]any
	if err := json.Unmarshal(body, &lease); err != nil {
		return false, err
	}
	spec, _ := lease["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
		lease["spec"] = spec
	}
	holder, _ := spec["holderIdentity"].(string)
	if holder != s.identity && holder != "" {
		held := 0.0
		if d, ok := spec["leaseDurationSeconds"].(float64); ok {
			held = d
		}
		renew, _ := time.Parse(microTime, fmt.Sprint(spec["renewTime"]))
		if now.Before(renew.Add(time.Duration(held * float64(time.Second)))) {
			if s.waitingOn != holder {
				logf("lease %s/%s is held by %s, waiting", s.namespace, s.lease, holder)
				s.waitingOn = holder
			}
			return false, nil
		}
	}
	if holder != s.identity {
		n, _ := spec["leaseTransitions"].(float64)
		spec["leaseTransitions"] = int(n) + 1
		spec["acquireTime"] = now.Format(microTime)
		spec["holderIdentity"] = s.identity
	}
	spec["leaseDurationSeconds"] = secs
	spec["renewTime"] = now.Format(microTime)
	code, _, err = s.c.do(ctx, "PUT", s.leasePath(), lease)
	if err != nil {
		return false, err
	}
	if code == http.StatusConflict {
		return false, nil
	}
	if code != http.StatusOK {
		return false, errOr(nil, "update lease", code)
	}
	if holder != s.identity {
		logf("acquired lease %s/%s (transitions %v)", s.namespace, s.lease, spec["leaseTransitions"])
		s.waitingOn = ""
	}
	return true, nil
}

// report writes the ClusterOperator's status unless it already says what this pod reports.
func (s *standin) report(ctx context.Context) error {
	path := "/apis/config.openshift.io/v1/clusteroperators/" + s.operator
	code, body, err := s.c.do(ctx, "GET", path, nil)
	if err != nil {
		return err
	}
	if code == http.StatusNotFound {
		if !s.reported {
			logf("clusteroperator %s does not exist yet, waiting", s.operator)
			s.reported = true
		}
		return nil
	}
	if code != http.StatusOK {
		return errOr(nil, "get clusteroperator", code)
	}
	var co map[string]any
	if err := json.Unmarshal(body, &co); err != nil {
		return err
	}
	status, _ := co["status"].(map[string]any)
	if current(status, s.version) {
		return nil
	}
	now := time.Now().UTC().Format(time.RFC3339)
	cond := func(t, v, reason string) map[string]any {
		return map[string]any{"type": t, "status": v, "reason": reason, "lastTransitionTime": now,
			"message": "standin-operator " + s.identity + " at " + s.version}
	}
	co["status"] = map[string]any{
		"conditions": []any{
			cond("Available", "True", "AsExpected"),
			cond("Progressing", "False", "AsExpected"),
			cond("Degraded", "False", "AsExpected"),
			cond("Upgradeable", "True", "AsExpected"),
		},
		"versions":       []any{map[string]any{"name": "operator", "version": s.version}},
		"relatedObjects": []any{map[string]any{"group": "", "resource": "namespaces", "name": s.namespace}},
	}
	code, _, err = s.c.do(ctx, "PUT", path+"/status", co)
	if err != nil {
		return err
	}
	if code == http.StatusConflict {
		return nil
	}
	if code != http.StatusOK {
		return errOr(nil, "update clusteroperator status", code)
	}
	logf("reported clusteroperator %s at version %s", s.operator, s.version)
	s.reported = true
	return nil
}

// current: the status already has Available=True and exactly this operator version.
func current(status map[string]any, version string) bool {
	if status == nil {
		return false
	}
	ok := false
	versions, _ := status["versions"].([]any)
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if m["name"] == "operator" {
			ok = m["version"] == version
		}
	}
	if !ok {
		return false
	}
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Available" {
			return m["status"] == "True"
		}
	}
	return false
}

// release empties the holder of a lease this pod holds, so a successor need not wait for it to
// expire.
func (s *standin) release(ctx context.Context) error {
	code, body, err := s.c.do(ctx, "GET", s.leasePath(), nil)
	if err != nil || code != http.StatusOK {
		return errOr(err, "get lease", code)
	}
	var lease map[string]any
	if err := json.Unmarshal(body, &lease); err != nil {
		return err
	}
	spec, _ := lease["spec"].(map[string]any)
	if spec == nil || spec["holderIdentity"] != s.identity {
		return nil
	}
	spec["holderIdentity"] = ""
	spec["leaseDurationSeconds"] = 1
	spec["renewTime"] = time.Now().UTC().Format(microTime)
	code, _, err = s.c.do(ctx, "PUT", s.leasePath(), lease)
	if err != nil || code != http.StatusOK {
		return errOr(err, "release lease", code)
	}
	logf("released lease %s/%s", s.namespace, s.lease)
	return nil
}

func errOr(err error, what string, code int) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("%s: unexpected status %d", what, code)
}

// check reads every required file and checks every required variable; anything missing ends
// the process with exit code 4 and "missing: ..." as its termination message.
func (s *standin) check() {
	for _, f := range s.files {
		if _, err := os.ReadFile(f); err != nil {
			missing("file %s: %v", f, err)
		}
	}
	for _, v := range s.env {
		if os.Getenv(v) == "" {
			missing("env %s is not set", v)
		}
	}
	s.checks++
	s.lastCheck = time.Now().UTC()
}

func missing(format string, args ...any) {
	msg := "missing: " + fmt.Sprintf(format, args...)
	logf("%s", msg)
	_ = os.WriteFile("/dev/termination-log", []byte(msg+"\n"), 0o644)
	os.Exit(4)
}

// done exits 0 after a last check, saying in the termination message what was checked.
func (s *standin) done() {
	s.check()
	msg := fmt.Sprintf("ok: %d checks of %d files and %d variables, the last at %s (unix %d.%06d)",
		s.checks, len(s.files), len(s.env), s.lastCheck.Format(time.RFC3339Nano),
		s.lastCheck.Unix(), s.lastCheck.Nanosecond()/1000)
	logf("%s", msg)
	_ = os.WriteFile("/dev/termination-log", []byte(msg+"\n"), 0o644)
	os.Exit(0)
}

// list splits a comma-separated variable, without empty items.
func list(name string) []string {
	var out []string
	for _, item := range strings.Split(os.Getenv(name), ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// denied logs a denial, leaves it in the termination message and exits 3.
func denied(d *deniedError) {
	logf("%v", d)
	_ = os.WriteFile("/dev/termination-log", []byte(d.Error()+"\n"), 0o644)
	os.Exit(3)
}

func main() {
	operator := os.Getenv("STANDIN_CLUSTEROPERATOR")
	version := os.Getenv("RELEASE_VERSION")
	if operator == "" || version == "" {
		fail("STANDIN_CLUSTEROPERATOR and RELEASE_VERSION must be set")
	}
	saDir := envOr("STANDIN_SA_DIR", "/var/run/secrets/kubernetes.io/serviceaccount")
	secs, err := strconv.Atoi(envOr("STANDIN_LEASE_DURATION", "3"))
	if err != nil || secs < 1 {
		fail("STANDIN_LEASE_DURATION must be a positive number of seconds")
	}
	linger, err := strconv.Atoi(envOr("STANDIN_TERMINATION_DELAY", "0"))
	if err != nil || linger < 0 {
		fail("STANDIN_TERMINATION_DELAY must be a number of seconds")
	}
	ns, err := os.ReadFile(saDir + "/namespace")
	if err != nil {
		fail("reading the pod's namespace: %v", err)
	}
	c, err := newClient(saDir)
	if err != nil {
		fail("%v", err)
	}
	host, _ := os.Hostname()
	s := &standin{
		c: c, namespace: strings.TrimSpace(string(ns)), operator: operator, version: version,
		lease: envOr("STANDIN_LEASE", operator+"-lock"), identity: envOr("POD_NAME", host),
		duration: time.Duration(secs) * time.Second,
		files:    list("STANDIN_REQUIRE_FILES"), env: list("STANDIN_REQUIRE_ENV"),
	}
	logf("starting: %s reports clusteroperator %s at %s, lease %s/%s (%ds), reads %v, needs env %v",
		s.identity, operator, version, s.namespace, s.lease, secs, s.files, s.env)
	s.check()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	tick := time.NewTicker(s.duration / 3)
	defer tick.Stop()
	for {
		step(ctx, s)
		select {
		case <-ctx.Done():
			logf("terminating")
			if s.leading {
				rctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				err := s.release(rctx)
				cancel()
				var d *deniedError
				if errors.As(err, &d) {
					denied(d)
				}
				if err != nil {
					logf("releasing the lease: %v", err)
				}
			}
			if linger > 0 {
				logf("terminating in %ds, reading my files meanwhile", linger)
				end := time.After(time.Duration(linger) * time.Second)
				for waiting := true; waiting; {
					select {
					case <-end:
						waiting = false
					case <-tick.C:
						s.check()
					}
				}
			}
			s.done()
		case <-tick.C:
		}
	}
}

// step is one round: the lease, then (while leading) the ClusterOperator. A denial ends the
// process; other errors are logged and retried on the next round.
func step(ctx context.Context, s *standin) {
	s.check()
	var d *deniedError
	leading, err := s.tryLease(ctx)
	if errors.As(err, &d) {
		denied(d)
	}
	if err != nil {
		if ctx.Err() == nil {
			logf("lease: %v", err)
		}
		return
	}
	if s.leading && !leading {
		logf("lost lease %s/%s", s.namespace, s.lease)
	}
	s.leading = leading
	if !leading {
		return
	}
	err = s.report(ctx)
	if errors.As(err, &d) {
		denied(d)
	}
	if err != nil && ctx.Err() == nil {
		logf("clusteroperator: %v", err)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
