// Package operator installs and upgrades etcd-adapter as an AddonProvider with the Cluster API
// Operator's own controller (sigs.k8s.io/cluster-api-operator's manager, built by
// hack/build-operator.sh at the version of hack/tools/cluster-api-operator/go.mod and run as its
// own process) against the test environment's management apiserver, from ConfigMaps holding the
// components and metadata.yaml that the project's release code (hack/release-manifests) builds.
// docs/install-with-operator.md's Install and Upgrade blocks create the ConfigMaps, the variables
// Secret and the AddonProvider and patch it, run as the page gives them with bash and kubectl
// (test/env/docblock, as test/docs runs the other pages' blocks). The test checks the result
// against what `clusterctl init` makes of the same release with the same variables
// (clusterctl's own library renders it).
//
// Real here: kube-apiserver and etcd, Cluster API's CRDs, the operator's CRDs
// (config/crd/bases of its module), its admission webhooks (config/webhook/manifests.yaml,
// served by the operator process with the test environment's serving certificate, as its
// Service and cert-manager would in a cluster), its provider and health-check controllers, and
// the clusterctl library inside it that fetches, renders, installs and upgrades.
//
// What the operator needs and a test environment does not run is provided as small as it can be,
// and only as the operator checks it:
//
//   - The core provider. The operator installs no other provider until a CoreProvider
//     `cluster-api` is Ready (internal/controller/preflight_checks.go), and the health-check
//     controller sets Ready from the Available condition of the Deployment the CoreProvider owns
//     (internal/controller/healthcheck/healthcheck_controller.go). The CoreProvider here is
//     installed by the operator from a ConfigMap holding Cluster API's metadata.yaml (from the
//     module) and its CRDs with one Deployment; no kube-controller-manager or kubelet runs in
//     the test environment, so the test sets that Deployment's Available condition, as the
//     Deployment controller would once its Pods were ready.
//   - cert-manager. The components hold an Issuer and Certificates; the stand-in is
//     cert-manager's two CRDs with an open schema (as in test/clusterctl): they are stored and
//     nothing issues them. The operator itself neither installs nor checks cert-manager.
//
// Applied but not run: the etcd-adapter Deployment (no kubelet runs Pods; test/clusterctl runs
// the manager against such an install).
package operator
