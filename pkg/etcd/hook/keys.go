package hook

// PreTerminateHookPrefix is Cluster API's pre-terminate hook annotation prefix
// (clusterv1.PreTerminateDeleteHookAnnotationPrefix): Cluster API deletes a Machine's
// infrastructure only once no annotation with it is left, after the drain.
const PreTerminateHookPrefix = "pre-terminate.delete.hook.machine.cluster.x-k8s.io"

// Pre-terminate hooks of others that the flow knows.
const (
	// ManagerHookKey is the etcd-adapter manager's own hook, on the Machines of a Cluster whose
	// ControlPlaneEtcd is in mode Manage. A provider that embeds the flow uses a key of its own:
	// the manager takes its hook off every Machine of a Cluster it does not manage.
	ManagerHookKey = PreTerminateHookPrefix + "/etcd-adapter"
	// ManagerHookValue is the value of ManagerHookKey: the owner.
	ManagerHookValue = "etcd-adapter"
	// KCPHookKey is KubeadmControlPlane's own hook (kcp-cleanup).
	KCPHookKey = PreTerminateHookPrefix + "/kcp-cleanup"
	// RKE2HookKey is cluster-api-provider-rke2's own hook (rke2-cleanup).
	RKE2HookKey = PreTerminateHookPrefix + "/rke2-cleanup"
)

// WaitingForPreTerminateHookReason is the reason of a Machine's Deleting condition once Cluster
// API drained the Node and detached its volumes and waits for pre-terminate hooks only
// (clusterv1.MachineDeletingWaitingForPreTerminateHookReason; on v1beta1 Machines it is in
// status.v1beta2.conditions from Cluster API v1.9 on).
const WaitingForPreTerminateHookReason = "WaitingForPreTerminateHook"

// Annotations a person or a provider sets, and the flow reads and writes.
const (
	// EmbeddedRemovalAnnotation on a control-plane object (a KThreesControlPlane, an
	// RKE2ControlPlane) says its provider removes etcd members itself with this flow; its value
	// is the provider's own pre-terminate hook key. The etcd-adapter manager then observes the
	// Cluster only (as in mode Observe: it takes its own hook off the Machines, after finishing a
	// removal already asked for) and never waits for the named hook, which waits for every
	// other one.
	EmbeddedRemovalAnnotation = "etcd-adapter.cluster.x-k8s.io/embedded-removal-hook"

	// ReleaseHookAnnotation on a Machine, with the value AnnotationTrue, lets a person release the
	// hook without a member removal (after fixing etcd by hand, or accepting the risk).
	ReleaseHookAnnotation = "etcd-adapter.cluster.x-k8s.io/release-hook"

	// RetryRemovalAnnotation on a deleting Machine, with the value AnnotationTrue, asks for its
	// rejected removal to run again from the start once a person fixed the cause: the stopped
	// request is withdrawn, RemovalRejectedAnnotation and this annotation are taken off, and the
	// next step runs on a fresh observation.
	RetryRemovalAnnotation = "etcd-adapter.cluster.x-k8s.io/retry-removal"

	// RemovalRejectedAnnotation is set by the flow on a Machine whose member removal etcd (or
	// K3s) rejected for good; its value is the rejection's reason. The hook stays until a
	// person releases it or asks for a retry.
	RemovalRejectedAnnotation = "etcd-adapter.cluster.x-k8s.io/removal-rejected"

	// AnnotationTrue is the one value that turns on an annotation that acts on a person's
	// say-so: "false", "no" or an empty value never act by accident.
	AnnotationTrue = "true"
)
