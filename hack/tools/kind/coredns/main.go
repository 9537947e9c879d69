// Command coredns is CoreDNS v1.14.6 with only the plugins a kind node's Corefile (kubeadm's
// default) and a hand-edited one of the same kind use: the cloud DNS back ends (route53, azure,
// clouddns), tracing, dnstap, etcd, geoip, nomad and the other heavy plugins of the stock build
// are left out, which cuts its cold build on two cores by most of its time. The directive order
// is the stock plugin.cfg's, restricted to these plugins.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/any"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/bufsize"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/cancel"
	_ "github.com/coredns/coredns/plugin/chaos"
	_ "github.com/coredns/coredns/plugin/debug"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/file"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/header"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/k8s_external"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/local"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metadata"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/minimal"
	_ "github.com/coredns/coredns/plugin/nsid"
	_ "github.com/coredns/coredns/plugin/pprof"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/rewrite"
	_ "github.com/coredns/coredns/plugin/root"
	_ "github.com/coredns/coredns/plugin/template"
	_ "github.com/coredns/coredns/plugin/timeouts"
	_ "github.com/coredns/coredns/plugin/transfer"
	_ "github.com/coredns/coredns/plugin/whoami"
)

// directives: the order plugins run in, as in CoreDNS's plugin.cfg.
var directives = []string{
	"root", "metadata", "cancel", "timeouts", "reload", "nsid", "bufsize", "bind", "debug",
	"ready", "health", "pprof", "prometheus", "errors", "log", "local", "any", "chaos",
	"loadbalance", "cache", "rewrite", "header", "minimal", "template", "transfer", "hosts",
	"k8s_external", "kubernetes", "file", "loop", "forward", "whoami",
}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
