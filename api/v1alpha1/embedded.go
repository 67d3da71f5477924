package v1alpha1

// ProgressingProviderRemovesMembersReason: the ControlPlaneEtcd asks for mode Manage, but the
// Cluster's control-plane object carries the embedded-removal annotation
// (github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook EmbeddedRemovalAnnotation): its provider
// removes members itself, so etcd is only observed and etcd-adapter's hook is taken off.
const ProgressingProviderRemovesMembersReason = "ProviderRemovesMembers"
