// Package clusterctl installs, upgrades, moves and deletes etcd-adapter with clusterctl's own
// library (sigs.k8s.io/cluster-api/cmd/clusterctl/client: Init, ApplyUpgrade, Move, Delete)
// against the test environment's management apiservers, from a local repository that the
// project's release code (hack/release-manifests, what `make release-manifests` runs) builds.
//
// Real here: kube-apiserver and etcd, Cluster API's CRDs and its Machine controller, clusterctl's
// code (repository reading, variable processing, inventory, installer, upgrade, move, delete),
// the components YAML built from config/, the etcd-adapter manager (manager.Run, in this
// process, against the same apiserver) and K3s-flavoured workload clusters (the K3s simulator,
// real etcd).
//
// What clusterctl needs and cannot fetch offline is provided as small as it can be, and only as
// clusterctl itself records or checks it:
//
//   - The core provider. The test environment installs Cluster API's CRDs and runs its
//     controllers in-process; clusterctl learns that through its inventory: a Provider object
//     `cluster-api` (CoreProvider, the Cluster API version of go.mod) written with clusterctl's
//     own inventory client, and the labels clusterctl puts on every component it installs
//     (`cluster.x-k8s.io/provider: cluster-api`, `clusterctl.cluster.x-k8s.io`) on Cluster API's
//     CRDs, which `clusterctl move` uses to find the types to move. Its repository is a local one
//     holding Cluster API's own metadata.yaml (from the module), which clusterctl reads for the
//     contract, and its CRDs as core-components.yaml.
//   - cert-manager. clusterctl init counts cert-manager as installed when it can create a
//     self-signed Issuer and a Certificate (cluster/cert_manager.go, waitForAPIReady), and
//     leaves one it did not install alone on upgrade (no `clusterctl.cluster.x-k8s.io/core:
//     cert-manager` objects). The stand-in is cert-manager's two CRDs, Issuer and Certificate,
//     with an open schema: the components' Issuer and Certificates are stored, and nothing
//     issues them.
//
// Applied but not run in the other tests: the components' Deployment (no kubelet runs Pods; the manager runs in
// this process instead, as `manager.Run` with the same flags' defaults), and the Certificates
// (no cert-manager). The webhook configurations the components install name the webhook Service
// and take their caBundle from cert-manager's CA injector; the test points them at the
// in-process manager's webhook server and its CA instead, which is what the Service and the
// injector would do in a cluster.
//
// TestInstallWithCertManager runs what the other tests stand in for. cert-manager is real: its
// controller and CA injector (hack/tools/cert-manager, over cert-manager's own packages at the
// version its go.mod names) run as processes against the management apiserver, which holds
// cert-manager's own CRDs; they issue the components' certificates and inject the CA into both
// webhook configurations. The manager runs as its own process with the arguments and
// environment of the Deployment clusterctl rendered, its Secret volumes kept as directories the
// way the kubelet keeps them. kube-apiserver calls the webhooks by their Service: its egress
// selector sends the traffic for the cluster network to an HTTP CONNECT proxy the test runs
// (serviceNetwork), which forwards a Service's ClusterIP to the manager process's port as
// kube-proxy forwards it to a Pod; the TLS between kube-apiserver and the manager is end to end.
// TestDeployedReplicasLeaderKill runs the Deployment's two replicas so, both behind the Service,
// and kills the Lease holder during a member removal. What still does not run: a kubelet, Pods,
// kube-proxy and DNS.
//
// TestDocsInstallUpgradeUninstall and TestQuickStartWithoutClusterctlInit run the docs' blocks
// themselves, as the pages give them, with bash, kubectl and the real clusterctl binary (Cluster
// API's, built by hack/build-assets.sh into the test assets), on that same footing: real
// cert-manager, the manager's replicas as processes. clusterctl reaches Cluster API's own release
// (the core provider's version list and metadata.yaml, on proxy.golang.org and github.com) through
// releaseHosts, which serves the module's; the kubelet's and the Deployment controller's part, a
// Deployment's status and its replicas ending on a scale-down, is played by the test.
//
// No Cluster controller runs: a Cluster's status (infrastructure provisioned, control plane
// initialized) is set by the test, also on the target of a move, where clusterctl creates the
// Cluster without it and Cluster API's Cluster controller would set it again.
package clusterctl
