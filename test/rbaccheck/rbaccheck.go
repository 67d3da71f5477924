// Package rbaccheck checks recorded apiserver requests against RBAC rules, both ways: every
// request must be allowed by a rule, and every (API group, resource, verb) a rule grants must
// have been used by some request. The end-to-end suite records the requests the etcd-adapter
// manager makes and checks them against the generated role (config/rbac), so the role is
// proven to cover what the manager does, and to be no wider.
//
// The matching follows Kubernetes' RBAC authorizer (k8s.io/kubernetes
// pkg/apis/rbac/v1/evaluation_helpers.go): "*" matches every verb, group or resource, a rule
// resource "*/sub" matches any resource's subresource sub, and a rule with resourceNames
// matches only requests that name one of them (a create, or a list or watch not narrowed to
// one name by a metadata.name field selector, names none).
package rbaccheck

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// Request is one apiserver request in RBAC's terms (the authorizer's attributes).
type Request struct {
	// Verb is get, list, watch, create, update, patch, delete or deletecollection; for a
	// non-resource request, the lower-case HTTP method.
	Verb string
	// Group is the API group; "" for the core group.
	Group string
	// Resource and Subresource name what is acted on ("machines", "status").
	Resource, Subresource string
	// Namespace is the request's namespace; "" for a cluster-scoped request.
	Namespace string
	// Name is the object named; "" for a collection.
	Name string
	// Path is set for a non-resource request (discovery, /version, /openapi).
	Path string
	// WatchList is set on a watch that asks for the initial state first (sendInitialEvents=true):
	// client-go's informers list this way where the apiserver supports it (WatchListClient),
	// and fall back to a list where it does not. The apiserver authorizes it as a watch.
	WatchList bool
}

// IsResource reports whether the request is about an API resource (not discovery).
func (r Request) IsResource() bool { return r.Path == "" }

// String names the request as `kubectl auth can-i` would ask it.
func (r Request) String() string {
	if !r.IsResource() {
		return r.Verb + " " + r.Path
	}
	res := r.Resource
	if r.Subresource != "" {
		res += "/" + r.Subresource
	}
	if r.Group != "" {
		res += "." + r.Group
	}
	s := r.Verb + " " + res
	if r.Name != "" {
		s += " " + r.Name
	}
	if r.Namespace != "" {
		s += " -n " + r.Namespace
	}
	return s
}

// ParseRequest reads an HTTP request's method and URL as the apiserver's request-info resolver
// does (k8s.io/apiserver pkg/endpoints/request/requestinfo.go): /api/v1/... is the core group,
// /apis/<group>/<version>/... a named group; GET on a collection is list, GET with watch=true
// (or the legacy /watch/ prefix) is watch, DELETE on a collection is deletecollection.
func ParseRequest(method string, u *url.URL) Request {
	parts := splitPath(u.Path)
	var group string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return Request{Verb: strings.ToLower(method), Path: u.Path}
	}
	if len(parts) == 0 {
		return Request{Verb: strings.ToLower(method), Path: u.Path}
	}
	watchPrefix := false
	if parts[0] == "watch" {
		watchPrefix, parts = true, parts[1:]
	}
	r := Request{Group: group}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		if len(parts) == 2 {
			// The namespace object itself.
			r.Resource, r.Name = "namespaces", parts[1]
			parts = nil
		} else {
			r.Namespace, parts = parts[1], parts[2:]
		}
	}
	if len(parts) > 0 {
		r.Resource = parts[0]
	}
	if len(parts) > 1 {
		r.Name = parts[1]
	}
	if len(parts) > 2 {
		r.Subresource = parts[2]
	}
	q := u.Query()
	collection := r.Name == ""
	switch method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watchPrefix || isTrue(q.Get("watch")):
			r.Verb = "watch"
			r.WatchList = isTrue(q.Get("sendInitialEvents"))
		case collection:
			r.Verb = "list"
		default:
			r.Verb = "get"
		}
	case http.MethodPost:
		r.Verb = "create"
	case http.MethodPut:
		r.Verb = "update"
	case http.MethodPatch:
		r.Verb = "patch"
	case http.MethodDelete:
		if collection {
			r.Verb = "deletecollection"
		} else {
			r.Verb = "delete"
		}
	default:
		r.Verb = strings.ToLower(method)
	}
	// A list or watch narrowed to one object by name is authorized as that name, as the
	// apiserver does since Kubernetes 1.29 (metadata.name field selector).
	if collection && (r.Verb == "list" || r.Verb == "watch") {
		if sel, err := fields.ParseSelector(q.Get("fieldSelector")); err == nil {
			if name, ok := sel.RequiresExactMatch("metadata.name"); ok {
				r.Name = name
			}
		}
	}
	return r
}

func splitPath(p string) []string {
	var out []string
	for _, s := range strings.Split(strings.Trim(p, "/"), "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func isTrue(s string) bool { return s == "true" || s == "1" }

// RuleSet is the rules one binding grants: a ClusterRole bound cluster-wide (Namespace ""), or
// a Role (or ClusterRole) bound in one namespace.
type RuleSet struct {
	// Name names the role, for messages.
	Name string
	// Namespace is where the rules apply; "" means every namespace and cluster-scoped objects.
	Namespace string
	// Rules are the role's rules.
	Rules []rbacv1.PolicyRule
}

// Allows reports whether a rule of the set allows the request, and which.
func (s RuleSet) Allows(r Request) (rbacv1.PolicyRule, bool) {
	if s.Namespace != "" && r.Namespace != s.Namespace {
		return rbacv1.PolicyRule{}, false
	}
	for _, rule := range s.Rules {
		if RuleAllows(rule, r) {
			return rule, true
		}
	}
	return rbacv1.PolicyRule{}, false
}

// RuleAllows reports whether one rule allows the request, as Kubernetes' RBAC authorizer
// decides it.
func RuleAllows(rule rbacv1.PolicyRule, r Request) bool {
	if !r.IsResource() {
		return matches(rule.Verbs, r.Verb) && nonResourceURLMatches(rule.NonResourceURLs, r.Path)
	}
	if !matches(rule.Verbs, r.Verb) || !matches(rule.APIGroups, r.Group) || !resourceMatches(rule.Resources, r) {
		return false
	}
	return len(rule.ResourceNames) == 0 || (r.Name != "" && slices.Contains(rule.ResourceNames, r.Name))
}

func matches(allowed []string, v string) bool {
	return slices.Contains(allowed, "*") || slices.Contains(allowed, v)
}

func resourceMatches(ruleResources []string, r Request) bool {
	combined := r.Resource
	if r.Subresource != "" {
		combined += "/" + r.Subresource
	}
	for _, rr := range ruleResources {
		switch {
		case rr == "*", rr == combined:
			return true
		case r.Subresource != "" && rr == "*/"+r.Subresource:
			return true
		}
	}
	return false
}

func nonResourceURLMatches(urls []string, path string) bool {
	for _, u := range urls {
		switch {
		case u == "*", u == path:
			return true
		case strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimSuffix(u, "*")):
			return true
		}
	}
	return false
}

// Grant is one (API group, resource, verb) a rule grants, with the rule's resource names.
type Grant struct {
	// Role names the RuleSet.
	Role string
	// Group, Resource and Verb are as written in the rule ("*" included).
	Group, Resource, Verb string
	// ResourceNames are the rule's resourceNames, if any.
	ResourceNames []string
}

func (g Grant) String() string {
	group := g.Group
	if group == "" {
		group = `""`
	}
	s := fmt.Sprintf("%s: %s %s (group %s)", g.Role, g.Verb, g.Resource, group)
	if len(g.ResourceNames) > 0 {
		s += fmt.Sprintf(" names %v", g.ResourceNames)
	}
	return s
}

// rule is the grant as a one-verb, one-group, one-resource rule.
func (g Grant) rule() rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: []string{g.Verb}, APIGroups: []string{g.Group}, Resources: []string{g.Resource}, ResourceNames: g.ResourceNames}
}

// Grants lists every (group, resource, verb) of the sets' resource rules.
func Grants(sets ...RuleSet) []Grant {
	var out []Grant
	for _, s := range sets {
		for _, rule := range s.Rules {
			for _, group := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, verb := range rule.Verbs {
						out = append(out, Grant{Role: s.Name, Group: group, Resource: res, Verb: verb, ResourceNames: rule.ResourceNames})
					}
				}
			}
		}
	}
	return out
}

// Result is the outcome of Check.
type Result struct {
	// Denied are the resource requests no rule allows, and the non-resource requests that
	// neither a rule nor Kubernetes' default discovery roles allow.
	Denied []Request
	// Unused are the grants no request used, minus the allowed-unused ones.
	Unused []Grant
	// AllowedUnused are grants no request used that the caller explained (AllowUnused).
	AllowedUnused []Grant
}

// OK reports whether every request was allowed and every grant used or explained.
func (r Result) OK() bool { return len(r.Denied) == 0 && len(r.Unused) == 0 }

// String says what is wrong, one finding a line.
func (r Result) String() string {
	var b strings.Builder
	if len(r.Denied) > 0 {
		b.WriteString("requests no rule of the role allows:\n")
		for _, d := range r.Denied {
			fmt.Fprintf(&b, "  %s\n", d)
		}
	}
	if len(r.Unused) > 0 {
		b.WriteString("grants of the role no request used (narrow the +kubebuilder:rbac markers, or explain them in the allow-list):\n")
		for _, g := range r.Unused {
			fmt.Fprintf(&b, "  %s\n", g)
		}
	}
	if len(r.AllowedUnused) > 0 {
		b.WriteString("grants not used here, allowed by the allow-list:\n")
		for _, g := range r.AllowedUnused {
			fmt.Fprintf(&b, "  %s\n", g)
		}
	}
	return b.String()
}

// UnusedAllowance explains why a grant may go unused in a run: the code path that needs it is
// not exercised there.
type UnusedAllowance struct {
	// Group, Resource and Verb name the grant as the rule writes it.
	Group, Resource, Verb string
	// Why is the reason, for the record.
	Why string
}

// explains reports whether the allowance explains the grant: same group and verb, and the same
// resource or a grant of every resource ("*") of the group.
func (a UnusedAllowance) explains(g Grant) bool {
	return a.Group == g.Group && a.Verb == g.Verb && (a.Resource == g.Resource || g.Resource == "*")
}

// discoveryPaths are the non-resource URLs every authenticated user may GET through the
// system:discovery and system:public-info-viewer ClusterRoles Kubernetes binds by default.
var discoveryPaths = []string{"/api", "/api/*", "/apis", "/apis/*", "/version", "/version/", "/openapi", "/openapi/*", "/healthz", "/livez", "/readyz"}

// WatchListFallbacks explains the list grants of resources that were only listed by watch-list
// requests: the same informer lists with a plain list on an apiserver without watch-list (the
// WatchList feature off, or older than Kubernetes 1.32), so it needs list there.
func WatchListFallbacks(requests []Request) []UnusedAllowance {
	var out []UnusedAllowance
	for _, r := range requests {
		if !r.WatchList {
			continue
		}
		a := UnusedAllowance{Group: r.Group, Resource: r.Resource, Verb: "list",
			Why: "informers list by watch-list (sendInitialEvents=true) here and fall back to list where the apiserver has no watch-list"}
		if !slices.ContainsFunc(out, func(o UnusedAllowance) bool { return o.Group == a.Group && o.Resource == a.Resource }) {
			out = append(out, a)
		}
	}
	return out
}

// Check checks the requests against the rule sets: each must be allowed by some set; each grant
// must be used by some request, unless allowUnused explains it.
func Check(requests []Request, sets []RuleSet, allowUnused []UnusedAllowance) Result {
	var res Result
	discovery := rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: discoveryPaths}
	for _, r := range requests {
		allowed := slices.ContainsFunc(sets, func(s RuleSet) bool { _, ok := s.Allows(r); return ok })
		if !allowed && !r.IsResource() {
			allowed = RuleAllows(discovery, r)
		}
		if !allowed && !slices.Contains(res.Denied, r) {
			res.Denied = append(res.Denied, r)
		}
	}
	for _, s := range sets {
		for _, g := range Grants(s) {
			one := RuleSet{Name: s.Name, Namespace: s.Namespace, Rules: []rbacv1.PolicyRule{g.rule()}}
			if slices.ContainsFunc(requests, func(r Request) bool { _, ok := one.Allows(r); return ok }) {
				continue
			}
			if slices.ContainsFunc(allowUnused, func(a UnusedAllowance) bool { return a.explains(g) }) {
				res.AllowedUnused = append(res.AllowedUnused, g)
				continue
			}
			res.Unused = append(res.Unused, g)
		}
	}
	return res
}
