// Package k3sbackend runs the K3s backend (pkg/k3s) against the real test environment: a real
// kube-apiserver, the K3s simulator for every K3s and RKE2 version profile, and Cluster API's
// ClusterCache. It lives in the main module because the environment does; pkg/k3s is a module of
// its own so a provider can import it at its own Cluster API and controller-runtime versions, and
// keeps only its unit tests.
package k3sbackend
