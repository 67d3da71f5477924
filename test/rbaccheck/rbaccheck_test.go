package rbaccheck

import (
	"net/http"
	"net/url"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name   string
		method string
		url    string
		want   Request
	}{
		{"A core named get", http.MethodGet, "/api/v1/namespaces/ns/secrets/c-etcd",
			Request{Verb: "get", Resource: "secrets", Namespace: "ns", Name: "c-etcd"}},
		{"A cluster-wide list of a named group", http.MethodGet, "/apis/cluster.x-k8s.io/v1beta2/machines?limit=500",
			Request{Verb: "list", Group: "cluster.x-k8s.io", Resource: "machines"}},
		{"A watch by parameter", http.MethodGet, "/apis/cluster.x-k8s.io/v1beta2/clusters?watch=true&resourceVersion=5",
			Request{Verb: "watch", Group: "cluster.x-k8s.io", Resource: "clusters"}},
		{"A watch-list", http.MethodGet, "/apis/cluster.x-k8s.io/v1beta2/clusters?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&watch=true",
			Request{Verb: "watch", Group: "cluster.x-k8s.io", Resource: "clusters", WatchList: true}},
		{"A watch by the legacy prefix", http.MethodGet, "/api/v1/watch/namespaces/ns/secrets",
			Request{Verb: "watch", Resource: "secrets", Namespace: "ns"}},
		{"A watch narrowed to one name is authorized as that name", http.MethodGet, "/api/v1/namespaces/ns/secrets?watch=1&fieldSelector=metadata.name%3Dc-kubeconfig",
			Request{Verb: "watch", Resource: "secrets", Namespace: "ns", Name: "c-kubeconfig"}},
		{"A status patch is the status subresource", http.MethodPatch, "/apis/etcdadapter.cluster.x-k8s.io/v1alpha1/namespaces/ns/controlplaneetcds/k3s/status",
			Request{Verb: "patch", Group: "etcdadapter.cluster.x-k8s.io", Resource: "controlplaneetcds", Subresource: "status", Namespace: "ns", Name: "k3s"}},
		{"A create", http.MethodPost, "/api/v1/namespaces/ns/events",
			Request{Verb: "create", Resource: "events", Namespace: "ns"}},
		{"An update", http.MethodPut, "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m",
			Request{Verb: "update", Group: "cluster.x-k8s.io", Resource: "machines", Namespace: "ns", Name: "m"}},
		{"A delete", http.MethodDelete, "/api/v1/namespaces/ns/pods/p",
			Request{Verb: "delete", Resource: "pods", Namespace: "ns", Name: "p"}},
		{"A delete of a collection", http.MethodDelete, "/api/v1/namespaces/ns/pods",
			Request{Verb: "deletecollection", Resource: "pods", Namespace: "ns"}},
		{"A namespace itself", http.MethodGet, "/api/v1/namespaces/ns",
			Request{Verb: "get", Resource: "namespaces", Name: "ns"}},
		{"Discovery is a non-resource request", http.MethodGet, "/apis/cluster.x-k8s.io/v1beta2",
			Request{Verb: "get", Path: "/apis/cluster.x-k8s.io/v1beta2"}},
		{"The root of discovery", http.MethodGet, "/api",
			Request{Verb: "get", Path: "/api"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			u, err := url.Parse(tt.url)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ParseRequest(tt.method, u)).To(Equal(tt.want))
		})
	}
}

func TestRuleAllows(t *testing.T) {
	machines := rbacv1.PolicyRule{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"machines"}, Verbs: []string{"get", "list", "watch", "patch"}}
	tests := []struct {
		name string
		rule rbacv1.PolicyRule
		req  Request
		want bool
	}{
		{"The verb, group and resource match", machines, Request{Verb: "patch", Group: "cluster.x-k8s.io", Resource: "machines", Name: "m"}, true},
		{"Another verb does not", machines, Request{Verb: "delete", Group: "cluster.x-k8s.io", Resource: "machines", Name: "m"}, false},
		{"Another group does not", machines, Request{Verb: "get", Group: "infrastructure.cluster.x-k8s.io", Resource: "machines", Name: "m"}, false},
		{"A subresource is not granted by its resource", machines, Request{Verb: "patch", Group: "cluster.x-k8s.io", Resource: "machines", Subresource: "status", Name: "m"}, false},
		{"A resource/subresource rule grants the subresource", rbacv1.PolicyRule{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"machines/status"}, Verbs: []string{"patch"}},
			Request{Verb: "patch", Group: "cluster.x-k8s.io", Resource: "machines", Subresource: "status", Name: "m"}, true},
		{"A */subresource rule grants that subresource of any resource", rbacv1.PolicyRule{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"*/status"}, Verbs: []string{"patch"}},
			Request{Verb: "patch", Group: "cluster.x-k8s.io", Resource: "clusters", Subresource: "status", Name: "c"}, true},
		{"A */subresource rule does not grant the resource", rbacv1.PolicyRule{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"*/status"}, Verbs: []string{"patch"}},
			Request{Verb: "patch", Group: "cluster.x-k8s.io", Resource: "clusters", Name: "c"}, false},
		{"A wildcard resource grants every resource and subresource of the group", rbacv1.PolicyRule{APIGroups: []string{"controlplane.cluster.x-k8s.io"}, Resources: []string{"*"}, Verbs: []string{"get"}},
			Request{Verb: "get", Group: "controlplane.cluster.x-k8s.io", Resource: "kthreescontrolplanes", Name: "c"}, true},
		{"Wildcard verbs and groups", rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"leases"}, Verbs: []string{"*"}},
			Request{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: "l"}, true},
		{"resourceNames allow a named request", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "watch"}, ResourceNames: []string{"a"}},
			Request{Verb: "get", Resource: "secrets", Name: "a"}, true},
		{"resourceNames refuse another name", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"a"}},
			Request{Verb: "get", Resource: "secrets", Name: "b"}, false},
		{"resourceNames refuse a list of the collection", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}, ResourceNames: []string{"a"}},
			Request{Verb: "list", Resource: "secrets"}, false},
		{"A rule with nonResourceURLs allows a matching path", rbacv1.PolicyRule{NonResourceURLs: []string{"/apis/*"}, Verbs: []string{"get"}},
			Request{Verb: "get", Path: "/apis/cluster.x-k8s.io"}, true},
		{"A resource rule allows no non-resource path", machines, Request{Verb: "get", Path: "/apis"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(RuleAllows(tt.rule, tt.req)).To(Equal(tt.want))
		})
	}
}

func TestCheck(t *testing.T) {
	role := RuleSet{Name: "manager", Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"machines"}, Verbs: []string{"get", "list", "watch", "patch", "update"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
	}}
	leases := RuleSet{Name: "leader-election", Namespace: "system", Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get"}},
	}}
	requests := []Request{
		{Verb: "list", Group: "cluster.x-k8s.io", Resource: "machines"},
		{Verb: "watch", Group: "cluster.x-k8s.io", Resource: "machines"},
		{Verb: "patch", Group: "cluster.x-k8s.io", Resource: "machines", Namespace: "ns", Name: "m"},
		{Verb: "create", Resource: "events", Namespace: "ns"},
		{Verb: "get", Path: "/apis"},
		{Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Namespace: "other", Name: "l"},
		{Verb: "delete", Group: "cluster.x-k8s.io", Resource: "machines", Namespace: "ns", Name: "m"},
	}
	allow := []UnusedAllowance{{Group: "authentication.k8s.io", Resource: "tokenreviews", Verb: "create", Why: "metrics endpoint"}}

	t.Run("A request no rule allows is denied; a Role allows only in its namespace; discovery is allowed to everyone", func(t *testing.T) {
		g := NewWithT(t)
		res := Check(requests, []RuleSet{role, leases}, allow)
		g.Expect(res.Denied).To(ConsistOf(requests[5], requests[6]))
	})
	t.Run("A grant no request used is unused unless allowed, and says so", func(t *testing.T) {
		g := NewWithT(t)
		res := Check(requests, []RuleSet{role, leases}, allow)
		g.Expect(res.Unused).To(ConsistOf(
			Grant{Role: "manager", Group: "cluster.x-k8s.io", Resource: "machines", Verb: "get"},
			Grant{Role: "manager", Group: "cluster.x-k8s.io", Resource: "machines", Verb: "update"},
			Grant{Role: "leader-election", Group: "coordination.k8s.io", Resource: "leases", Verb: "get"},
		))
		g.Expect(res.AllowedUnused).To(ConsistOf(Grant{Role: "manager", Group: "authentication.k8s.io", Resource: "tokenreviews", Verb: "create"}))
		g.Expect(res.OK()).To(BeFalse())
		g.Expect(res.String()).To(And(ContainSubstring("manager: update machines (group cluster.x-k8s.io)"), ContainSubstring("delete machines.cluster.x-k8s.io m -n ns")))
	})
	t.Run("A wildcard grant is used by any request it allows", func(t *testing.T) {
		g := NewWithT(t)
		wild := RuleSet{Name: "cp", Rules: []rbacv1.PolicyRule{{APIGroups: []string{"controlplane.cluster.x-k8s.io"}, Resources: []string{"*"}, Verbs: []string{"list", "watch"}}}}
		res := Check([]Request{{Verb: "list", Group: "controlplane.cluster.x-k8s.io", Resource: "kubeadmcontrolplanes"}}, []RuleSet{wild}, nil)
		g.Expect(res.Denied).To(BeEmpty())
		g.Expect(res.Unused).To(ConsistOf(Grant{Role: "cp", Group: "controlplane.cluster.x-k8s.io", Resource: "*", Verb: "watch"}))
	})
	t.Run("A list grant is explained by a watch-list of the resource, only of that resource", func(t *testing.T) {
		g := NewWithT(t)
		lists := RuleSet{Name: "lists", Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"list", "watch"}}}}
		reqs := []Request{{Verb: "watch", Resource: "secrets", WatchList: true}, {Verb: "watch", Resource: "configmaps"}}
		res := Check(reqs, []RuleSet{lists}, WatchListFallbacks(reqs))
		g.Expect(res.AllowedUnused).To(ConsistOf(Grant{Role: "lists", Resource: "secrets", Verb: "list"}))
		g.Expect(res.Unused).To(ConsistOf(Grant{Role: "lists", Resource: "configmaps", Verb: "list"}))
	})
	t.Run("A list grant of every resource of a group is explained by a watch-list of one of them", func(t *testing.T) {
		g := NewWithT(t)
		wild := RuleSet{Name: "cp", Rules: []rbacv1.PolicyRule{{APIGroups: []string{"controlplane.cluster.x-k8s.io"}, Resources: []string{"*"}, Verbs: []string{"list", "watch"}}}}
		reqs := []Request{{Verb: "watch", Group: "controlplane.cluster.x-k8s.io", Resource: "kthreescontrolplanes", WatchList: true}}
		res := Check(reqs, []RuleSet{wild}, WatchListFallbacks(reqs))
		g.Expect(res.OK()).To(BeTrue(), res.String())
		g.Expect(res.AllowedUnused).To(ConsistOf(Grant{Role: "cp", Group: "controlplane.cluster.x-k8s.io", Resource: "*", Verb: "list"}))
	})
	t.Run("A grant with resourceNames is used only by a request naming one of them", func(t *testing.T) {
		g := NewWithT(t)
		named := RuleSet{Name: "named", Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"a"}}}}
		g.Expect(Check([]Request{{Verb: "get", Resource: "secrets", Name: "b"}}, []RuleSet{named}, nil).Unused).To(HaveLen(1))
		g.Expect(Check([]Request{{Verb: "get", Resource: "secrets", Name: "a"}}, []RuleSet{named}, nil).OK()).To(BeTrue())
	})
}
