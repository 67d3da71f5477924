package rbaccheck

import "slices"

// NeverGranted are requests the manager's role must never allow, each with the reason: the
// least-privilege promises of docs/security.md. A cluster-wide list or watch of Secrets would
// let the manager (and anyone holding its token) read every Secret of the management cluster;
// the manager reads the few Secrets it needs by name, uncached.
var NeverGranted = []Forbidden{
	{Request: Request{Verb: "list", Resource: "secrets"}, Why: "Secrets are read by name (get), uncached; a list returns every Secret of a namespace"},
	{Request: Request{Verb: "watch", Resource: "secrets"}, Why: "Secrets are read by name (get), uncached; a watch streams every Secret of a namespace"},
	{Request: Request{Verb: "list", Resource: "secrets", Namespace: "kube-system"}, Why: "no Secret of any namespace is listed"},
	{Request: Request{Verb: "watch", Resource: "secrets", Namespace: "kube-system"}, Why: "no Secret of any namespace is watched"},
}

// Forbidden is a request a role must not allow, and why.
type Forbidden struct {
	Request
	// Why is the reason, for the message.
	Why string
}

// Allowed returns the forbidden requests that some rule set allows.
func Allowed(sets []RuleSet, forbidden []Forbidden) []Forbidden {
	var out []Forbidden
	for _, f := range forbidden {
		if slices.ContainsFunc(sets, func(s RuleSet) bool { _, ok := s.Allows(f.Request); return ok }) {
			out = append(out, f)
		}
	}
	return out
}
