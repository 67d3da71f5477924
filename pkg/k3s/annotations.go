package k3s

// Annotations the backend writes on a workload cluster's Node, next to K3s's own
// `etcd.k3s.cattle.io/remove`, in the same optimistic-concurrency patch.
//
// They make a removal idempotent across controller restarts and K3s versions: K3s removes
// `node-name` when it removes the member, some versions keep `remove=true` after success, and a
// server that restarts rejoins under a new member name. Without a record of which member was
// asked to go, a restarted controller could mistake the rejoined member for the one it asked
// to remove, and remove it too.
const (
	// RemovingMemberAnnotation records the etcd member name (the value of
	// `etcd.k3s.cattle.io/node-name` when the removal was requested) whose removal this project
	// asked K3s for. The backend never asks again for a Node that carries it: delete it to allow
	// a new removal request on that Node (for example after K3s refused one).
	RemovingMemberAnnotation = "etcd-adapter.cluster.x-k8s.io/removing-member"

	// RemovalRequestedAtAnnotation records when the removal was requested (RFC 3339), so a
	// removal that waits on K3s can say for how long.
	RemovalRequestedAtAnnotation = "etcd-adapter.cluster.x-k8s.io/removal-requested-at"
)

// RemovalConfirmedAnnotation records the etcd member name whose removal the K3s backend saw
// K3s claim (`removed-node-name`) together with evidence that agrees (the etcd leader's K3s
// marked the Node NotAMember, or the removed server stopped). K3s deletes `removed-node-name`
// when the server rejoins under a new member name, and a cluster reset renames the surviving
// member and deletes the removal annotations too; only this record tells the two apart
// afterwards, so a renamed survivor is never reported as the removed member.
const RemovalConfirmedAnnotation = "etcd-adapter.cluster.x-k8s.io/removal-confirmed"
