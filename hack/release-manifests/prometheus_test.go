package main

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/etcd-adapter/etcd-adapter/controlplane/metrics"
)

// metricName matches an etcd-adapter metric name in a PromQL expression.
var metricName = regexp.MustCompile(metrics.Namespace + `_[a-z_]+`)

// fromOtherComponents are the alerts on another component's metric about etcd-adapter, and it.
var fromOtherComponents = map[string]string{
	// kube-apiserver counts the calls to etcd-adapter's webhooks that failed open.
	"EtcdAdapterWebhookFailOpen": "apiserver_admission_webhook_fail_open_count",
}

// TestPrometheusRules builds config/prometheus and checks that every alert expression names only
// metrics the manager exports, and that the fault-tolerance alert is limited to control planes
// of 3 or more voting members (1 or 2 have fault tolerance 0 by design).
func TestPrometheusRules(t *testing.T) {
	g := NewWithT(t)
	objs := decodeAll(g, filepath.Join("..", "..", "config", "prometheus"))
	exported := exportedMetrics(g)

	var rules []map[string]any
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[o.GetKind()] = true
		g.Expect(o.GetNamespace()).To(Equal("etcd-adapter-system"), "%s %s", o.GetKind(), o.GetName())
		if o.GetKind() != "PrometheusRule" {
			continue
		}
		groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "groups")
		for _, grp := range groups {
			rs, _, _ := unstructured.NestedSlice(grp.(map[string]any), "rules")
			for _, r := range rs {
				rules = append(rules, r.(map[string]any))
			}
		}
	}
	g.Expect(kinds).To(Equal(map[string]bool{"PrometheusRule": true, "ServiceMonitor": true}))
	g.Expect(rules).NotTo(BeEmpty())

	byAlert := map[string]string{}
	for _, r := range rules {
		alert, _ := r["alert"].(string)
		expr, _ := r["expr"].(string)
		g.Expect(alert).NotTo(BeEmpty())
		names := metricName.FindAllString(expr, -1)
		if other, ok := fromOtherComponents[alert]; ok {
			g.Expect(expr).To(ContainSubstring(other), "alert %s", alert)
		} else {
			g.Expect(names).NotTo(BeEmpty(), "alert %s must use etcd-adapter's metrics", alert)
		}
		for _, n := range names {
			g.Expect(exported).To(HaveKey(n), "alert %s names %s, which the manager does not export", alert, n)
		}
		byAlert[alert] = expr
	}

	ft := byAlert["EtcdAdapterNoFaultTolerance"]
	g.Expect(ft).To(ContainSubstring(metrics.Namespace + "_fault_tolerance"))
	// Note: only a condition on the voting member count, joined with "and", keeps a 1- or
	// 2-member control plane (fault tolerance 0 by design) from firing.
	g.Expect(regexp.MustCompile(`(?s)\)\s*==\s*0\s*and on \(namespace, cluster, backend\)\s*.*`+
		regexp.QuoteMeta(`(`+metrics.Namespace+`_members{role!="Learner"})`)+`\)\s*>=\s*3\s*$`).MatchString(ft)).
		To(BeTrue(), "the fault-tolerance alert must require 3 or more voting members:\n%s", ft)
}

// TestMetricsService checks that the metrics Service of the components reaches the manager's
// metrics port and that the metrics-reader ClusterRole grants GET /metrics.
func TestMetricsService(t *testing.T) {
	g := NewWithT(t)
	objs := components(g)
	var svc, reader *unstructured.Unstructured
	var deploy *unstructured.Unstructured
	for _, o := range objs {
		switch {
		case o.GetKind() == "Service" && o.GetName() == "etcd-adapter-metrics-service":
			svc = o
		case o.GetKind() == "ClusterRole" && o.GetName() == "etcd-adapter-metrics-reader":
			reader = o
		case o.GetKind() == "Deployment":
			deploy = o
		}
	}
	g.Expect(svc).NotTo(BeNil())
	g.Expect(reader).NotTo(BeNil())
	g.Expect(deploy).NotTo(BeNil())

	selector, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	podLabels, _, _ := unstructured.NestedStringMap(deploy.Object, "spec", "template", "metadata", "labels")
	for k, v := range selector {
		g.Expect(podLabels).To(HaveKeyWithValue(k, v))
	}
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	g.Expect(ports).To(HaveLen(1))
	g.Expect(ports[0]).To(HaveKeyWithValue("targetPort", "metrics"))
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	g.Expect(c["args"]).To(ContainElement("--diagnostics-address=:8443"))
	g.Expect(c["ports"]).To(ContainElement(And(HaveKeyWithValue("name", "metrics"), HaveKeyWithValue("containerPort", BeNumerically("==", 8443)))))

	rules, _, _ := unstructured.NestedSlice(reader.Object, "rules")
	g.Expect(rules).To(ConsistOf(map[string]any{"nonResourceURLs": []any{"/metrics"}, "verbs": []any{"get"}}))
}

// exportedMetrics is the set of etcd-adapter metric names the manager exports, as
// metrics.SeriesNames reads them from the registered collectors.
func exportedMetrics(g Gomega) map[string]bool {
	out := map[string]bool{}
	for _, n := range metrics.SeriesNames() {
		out[n] = true
	}
	g.Expect(out).To(HaveKey(metrics.Namespace + "_fault_tolerance"))
	return out
}

// decodeAll builds the kustomization in dir and decodes its objects.
func decodeAll(g Gomega, dir string) []*unstructured.Unstructured {
	y, err := Build(dir, defaultImage)
	g.Expect(err).NotTo(HaveOccurred())
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(y), 4096)
	var out []*unstructured.Unstructured
	for {
		o := &unstructured.Unstructured{}
		err := dec.Decode(&o.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		g.Expect(err).NotTo(HaveOccurred())
		if len(o.Object) > 0 {
			out = append(out, o)
		}
	}
}

// TestServiceMonitor checks that config/prometheus's ServiceMonitor selects the components'
// metrics Service, and only it, by a port the Service has.
func TestServiceMonitor(t *testing.T) {
	g := NewWithT(t)
	var monitor *unstructured.Unstructured
	for _, o := range decodeAll(g, filepath.Join("..", "..", "config", "prometheus")) {
		if o.GetKind() == "ServiceMonitor" {
			monitor = o
		}
	}
	g.Expect(monitor).NotTo(BeNil())
	selector, _, _ := unstructured.NestedStringMap(monitor.Object, "spec", "selector", "matchLabels")
	g.Expect(selector).NotTo(BeEmpty())
	endpoints, _, _ := unstructured.NestedSlice(monitor.Object, "spec", "endpoints")
	g.Expect(endpoints).To(HaveLen(1))
	port, _, _ := unstructured.NestedString(endpoints[0].(map[string]any), "port")

	var selected []string
	for _, o := range components(g) {
		if o.GetKind() != "Service" || o.GetNamespace() != monitor.GetNamespace() {
			continue
		}
		matches := true
		for k, v := range selector {
			if o.GetLabels()[k] != v {
				matches = false
			}
		}
		if !matches {
			continue
		}
		selected = append(selected, o.GetName())
		ports, _, _ := unstructured.NestedSlice(o.Object, "spec", "ports")
		g.Expect(ports).To(ContainElement(HaveKeyWithValue("name", port)), o.GetName())
	}
	g.Expect(selected).To(Equal([]string{"etcd-adapter-metrics-service"}))
}

// TestServiceMonitor_verifiesTheEndpoint checks that Prometheus verifies the metrics endpoint:
// no insecureSkipVerify; the CA it trusts is the Secret of a cert-manager Certificate whose DNS
// names include the serverName it expects; and the manager serves that Certificate on the
// metrics port.
func TestServiceMonitor_verifiesTheEndpoint(t *testing.T) {
	g := NewWithT(t)
	var monitor *unstructured.Unstructured
	for _, o := range decodeAll(g, filepath.Join("..", "..", "config", "prometheus")) {
		if o.GetKind() == "ServiceMonitor" {
			monitor = o
		}
	}
	g.Expect(monitor).NotTo(BeNil())
	endpoints, _, _ := unstructured.NestedSlice(monitor.Object, "spec", "endpoints")
	g.Expect(endpoints).To(HaveLen(1))
	tls, _, _ := unstructured.NestedMap(endpoints[0].(map[string]any), "tlsConfig")
	g.Expect(tls).NotTo(HaveKey("insecureSkipVerify"))
	caSecret, _, _ := unstructured.NestedString(tls, "ca", "secret", "name")
	serverName, _, _ := unstructured.NestedString(tls, "serverName")
	g.Expect(caSecret).NotTo(BeEmpty())

	var dnsNames []string
	var mounted, certDirArg string
	for _, o := range components(g) {
		switch o.GetKind() {
		case "Certificate":
			if name, _, _ := unstructured.NestedString(o.Object, "spec", "secretName"); name == caSecret {
				dnsNames, _, _ = unstructured.NestedStringSlice(o.Object, "spec", "dnsNames")
			}
		case "Deployment":
			volumes, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
			var volume string
			for _, v := range volumes {
				if name, _, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName"); name == caSecret {
					volume, _, _ = unstructured.NestedString(v.(map[string]any), "name")
				}
			}
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				mounts, _, _ := unstructured.NestedSlice(c.(map[string]any), "volumeMounts")
				for _, m := range mounts {
					if name, _, _ := unstructured.NestedString(m.(map[string]any), "name"); name == volume && volume != "" {
						mounted, _, _ = unstructured.NestedString(m.(map[string]any), "mountPath")
					}
				}
				args, _, _ := unstructured.NestedStringSlice(c.(map[string]any), "args")
				for _, a := range args {
					if v, ok := strings.CutPrefix(a, "--diagnostics-cert-dir="); ok {
						certDirArg = v
					}
				}
			}
		}
	}
	g.Expect(dnsNames).To(ContainElement(serverName), "the Certificate behind the trusted CA must name the endpoint Prometheus expects")
	g.Expect(mounted).NotTo(BeEmpty(), "the manager must mount the Certificate's Secret")
	g.Expect(certDirArg).To(Equal(mounted), "the manager must serve metrics with the mounted Certificate")
}
