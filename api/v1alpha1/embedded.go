package v1alpha1

import "github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"

// ProgressingProviderRemovesMembersReason is the Progressing reason when the ControlPlaneEtcd
// asks for mode Manage, but the Cluster's control-plane object carries the embedded-removal
// annotation (github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook EmbeddedRemovalAnnotation): its
// provider removes members itself, so etcd is only observed and etcd-adapter's hook is taken off.
const ProgressingProviderRemovesMembersReason = "ProviderRemovesMembers"

// EmbeddedRemovalAnnotation on a control-plane object names the pre-terminate hook with which its
// provider removes etcd members itself (hook.EmbeddedRemovalAnnotation, where it is explained).
const EmbeddedRemovalAnnotation = hook.EmbeddedRemovalAnnotation
