package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/component-base/logs"
	logsv1 "k8s.io/component-base/logs/api/v1"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"

	"github.com/etcd-adapter/etcd-adapter/cmd/etcd-adapter/manager"
)

// argsBeforeVariables are the manager's arguments in the Deployment before its settings became
// clusterctl variables, and the literal ones added since (--shutdown-delay). Rendered with no variable set, the components must run the manager with
// the settings these give.
var argsBeforeVariables = []string{
	"--leader-elect",
	"--diagnostics-address=:8443",
	"--diagnostics-cert-dir=/tmp/k8s-metrics-server/serving-certs",
	"--health-addr=:9440",
	"--webhook-port=9443",
	"--shutdown-delay=10s",
	"--snapshot-scratch-dir=/var/lib/etcd-adapter/snapshots",
}

// replicasBeforeVariables is the Deployment's replicas before it became a clusterctl variable.
const replicasBeforeVariables = 2

// deployed is what the manager Deployment of the rendered components runs: its replicas and the
// settings its arguments give to the manager's own flag set.
type deployed struct {
	Replicas int64
	Options  *manager.Options
	Logging  *logsv1.LoggingConfiguration
}

// TestComponentsVariables_haveDefaults: the components have clusterctl variables, each named
// ETCD_ADAPTER_*, and each with a default, so `clusterctl init --addon etcd-adapter` needs none
// of them set.
func TestComponentsVariables_haveDefaults(t *testing.T) {
	g := NewWithT(t)
	vars := variableDefaults(g)
	g.Expect(vars).NotTo(BeEmpty(), "the manager's settings are clusterctl variables")
	for name, def := range vars {
		g.Expect(name).To(HavePrefix("ETCD_ADAPTER_"))
		g.Expect(def).NotTo(BeNil(), "%s has no default: clusterctl init would refuse to install without it", name)
	}
}

// TestComponentsVariables_defaults: rendered by clusterctl's variable processor with no variable
// set, the Deployment runs the manager with the same settings as before the variables.
func TestComponentsVariables_defaults(t *testing.T) {
	g := NewWithT(t)
	got := deployment(g, render(g, nil))
	opts, logging := parseArgs(g, argsBeforeVariables)
	g.Expect(got).To(Equal(deployed{Replicas: replicasBeforeVariables, Options: opts, Logging: logging}))
	g.Expect(got.Options.Validate()).To(Succeed())
}

// TestComponentsVariables_overrides: every variable, set, changes the one setting it names and
// nothing else; the table covers every variable of the components.
func TestComponentsVariables_overrides(t *testing.T) {
	tests := []struct {
		variable string
		value    string
		want     func(d *deployed)
	}{
		{variable: "ETCD_ADAPTER_REPLICAS", value: "3", want: func(d *deployed) { d.Replicas = 3 }},
		{variable: "ETCD_ADAPTER_LOG_LEVEL", value: "5", want: func(d *deployed) { d.Logging.Verbosity = 5 }},
		{variable: "ETCD_ADAPTER_LOG_FORMAT", value: "json", want: func(d *deployed) { d.Logging.Format = "json" }},
		{variable: "ETCD_ADAPTER_OBSERVATION_INTERVAL", value: "1m", want: func(d *deployed) { d.Options.ObservationInterval = time.Minute }},
		{variable: "ETCD_ADAPTER_ETCD_DIAL_TIMEOUT", value: "5s", want: func(d *deployed) { d.Options.EtcdDialTimeout = 5 * time.Second }},
		{variable: "ETCD_ADAPTER_ETCD_CALL_TIMEOUT", value: "30s", want: func(d *deployed) { d.Options.EtcdCallTimeout = 30 * time.Second }},
		{variable: "ETCD_ADAPTER_CONCURRENCY", value: "25", want: func(d *deployed) { d.Options.Concurrency = 25 }},
		{variable: "ETCD_ADAPTER_CLUSTERCACHE_CONCURRENCY", value: "250", want: func(d *deployed) { d.Options.ClusterCacheConcurrency = 250 }},
		{variable: "ETCD_ADAPTER_CLUSTERCACHE_CLIENT_QPS", value: "50", want: func(d *deployed) { d.Options.ClusterCacheQPS = 50 }},
		{variable: "ETCD_ADAPTER_CLUSTERCACHE_CLIENT_BURST", value: "80", want: func(d *deployed) { d.Options.ClusterCacheBurst = 80 }},
		{variable: "ETCD_ADAPTER_KUBE_API_QPS", value: "40", want: func(d *deployed) { d.Options.KubeAPIQPS = 40 }},
		{variable: "ETCD_ADAPTER_KUBE_API_BURST", value: "60", want: func(d *deployed) { d.Options.KubeAPIBurst = 60 }},
		{variable: "ETCD_ADAPTER_SYNC_PERIOD", value: "30m", want: func(d *deployed) { d.Options.SyncPeriod = 30 * time.Minute }},
		{variable: "ETCD_ADAPTER_WATCH_FILTER", value: "shard-a", want: func(d *deployed) { d.Options.WatchFilter = "shard-a" }},
	}
	var covered []string
	for _, tt := range tests {
		covered = append(covered, tt.variable)
		t.Run(tt.variable, func(t *testing.T) {
			g := NewWithT(t)
			want := deployment(g, render(g, nil))
			tt.want(&want)
			g.Expect(deployment(g, render(g, map[string]string{tt.variable: tt.value}))).To(Equal(want))
		})
	}
	g := NewWithT(t)
	g.Expect(covered).To(ConsistOf(sortedKeys(variableDefaults(g))), "every variable of the components has a row")
}

// variableDefaults returns the components' clusterctl variables and their defaults (nil: none),
// as clusterctl reads them.
func variableDefaults(g Gomega) map[string]*string {
	raw, err := Build(filepath.Join("..", "..", "config", "default"), defaultImage)
	g.Expect(err).NotTo(HaveOccurred())
	vars, err := yamlprocessor.NewSimpleProcessor().GetVariableMap(raw)
	g.Expect(err).NotTo(HaveOccurred())
	return vars
}

// render returns the objects of the components as clusterctl installs them: built from
// config/default and processed by clusterctl's SimpleProcessor with vars set (the other
// variables get their defaults).
func render(g Gomega, vars map[string]string) []*unstructured.Unstructured {
	return renderDir(g, "default", vars)
}

// renderDir is render for config/<dir>.
func renderDir(g Gomega, dir string, vars map[string]string) []*unstructured.Unstructured {
	raw, err := Build(filepath.Join("..", "..", "config", dir), "example.com/etcd-adapter:v0.0.0-test")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).To(ContainSubstring("image: example.com/etcd-adapter:v0.0.0-test"))
	y, err := yamlprocessor.NewSimpleProcessor().Process(raw, func(name string) (string, error) {
		if v, ok := vars[name]; ok {
			return v, nil
		}
		return "", fmt.Errorf("variable %s is not set", name)
	})
	g.Expect(err).NotTo(HaveOccurred())
	return decodeObjects(g, y)
}

// decodeObjects decodes a YAML stream the way the apiserver reads JSON, so an integer stays an
// int64 and a quoted number stays a string.
func decodeObjects(g Gomega, y []byte) []*unstructured.Unstructured {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(y)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		g.Expect(err).NotTo(HaveOccurred())
		j, err := utilyaml.ToJSON(doc)
		g.Expect(err).NotTo(HaveOccurred())
		if string(j) == "null" {
			continue
		}
		o := &unstructured.Unstructured{}
		g.Expect(o.UnmarshalJSON(j)).To(Succeed())
		out = append(out, o)
	}
}

// deployment returns what the manager Deployment among objs runs.
func deployment(g Gomega, objs []*unstructured.Unstructured) deployed {
	var deploy *appsv1.Deployment
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			g.Expect(deploy).To(BeNil(), "one Deployment")
			deploy = &appsv1.Deployment{}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, deploy)).To(Succeed(),
				"the rendered Deployment is a valid Deployment (spec.replicas an integer, every argument a string)")
		}
	}
	g.Expect(deploy).NotTo(BeNil())
	g.Expect(deploy.Spec.Replicas).NotTo(BeNil())
	g.Expect(deploy.Spec.Template.Spec.Containers).To(HaveLen(1))
	opts, logging := parseArgs(g, deploy.Spec.Template.Spec.Containers[0].Args)
	return deployed{Replicas: int64(*deploy.Spec.Replicas), Options: opts, Logging: logging}
}

// parseArgs parses args with the manager's own flag set.
func parseArgs(g Gomega, args []string) (*manager.Options, *logsv1.LoggingConfiguration) {
	opts, logging := manager.NewOptions(), logs.NewOptions()
	fs := manager.NewFlagSet(opts, logging)
	g.Expect(fs.Parse(args)).To(Succeed(), strings.Join(args, " "))
	g.Expect(fs.Args()).To(BeEmpty(), "no positional arguments in %q", args)
	return opts, logging
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
