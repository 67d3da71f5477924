package k3s

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// blindSpots are the checks Node objects cannot support. K3s reports a member only through the
// Node that hosts it, so a member without a Node (a ghost) is invisible; it publishes no member
// lists, cluster IDs, alarms, or leader.
var blindSpots = []etcd.BlindSpot{
	etcd.BlindSpotGhostMembers,
	etcd.BlindSpotMemberLists,
	etcd.BlindSpotClusterID,
	etcd.BlindSpotAlarms,
	etcd.BlindSpotLeader,
}

// Observe reads the etcd Nodes and returns what K3s says about their members. A Node that
// hosts no member (no node-name annotation, or EtcdIsVoter NotAMember) contributes no member.
//
// It lists the Nodes live (Config.Client), not from the cache: a cache keeps answering with
// old Nodes while the apiserver is down, and a snapshot must not pass old news for current.
// It fails only when Nodes cannot be listed, with ErrUnreachable.
func (b *Backend) Observe(ctx context.Context) (*etcd.Snapshot, error) {
	nodes, err := b.etcdNodes(ctx, b.cfg.Client)
	if err != nil {
		return nil, err
	}
	now := b.cfg.Now()
	s := &etcd.Snapshot{
		Backend: BackendName, ObservedAt: now,
		BlindSpots:  slices.Clone(blindSpots),
		EvidenceTTL: b.cfg.StaleAfter(),
		// K3s publishes no etcd member IDs on Nodes: the IDs are MemberID's hashes of the names.
		SyntheticMemberIDs: true,
	}
	for _, r := range assessNodes(nodes, b.clock()) {
		s.Members = append(s.Members, *r.member)
		s.Evidence = append(s.Evidence, r.evidence)
	}
	ctrl.LoggerFrom(ctx).V(4).Info("Observed K3s etcd through Nodes", "etcdNodes", len(nodes), "members", len(s.Members))
	return s, nil
}

// etcdNodes lists the Nodes K3s labelled etcd, sorted by name and trimmed (TrimNode). K3s labels
// only its etcd servers, one member each, so more than etcd.MaxMembers of them, or a Node whose
// K3s annotation is longer than any K3s writes, is etcd.ErrTooLarge: one request of at most
// etcd.MaxMembers+1 Nodes is read, never the rest.
func (b *Backend) etcdNodes(ctx context.Context, r client.Reader) ([]*corev1.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.CallTimeout)
	defer cancel()
	list := &corev1.NodeList{}
	if err := r.List(ctx, list, client.MatchingLabels{EtcdRoleLabel: "true"}, client.Limit(etcd.MaxMembers+1)); err != nil {
		return nil, readError(err, "failed to list etcd Nodes")
	}
	// Only the count tells: a cache reader (remove.go reads through one) may set a continue
	// token with every item listed, and a live list of etcd.MaxMembers+1 is already too many.
	if len(list.Items) > etcd.MaxMembers {
		return nil, fmt.Errorf("%w: the workload cluster has more than %d Nodes labelled %s", etcd.ErrTooLarge, etcd.MaxMembers, EtcdRoleLabel)
	}
	nodes := make([]*corev1.Node, 0, len(list.Items))
	for i := range list.Items {
		n := &list.Items[i]
		for k, v := range n.Annotations {
			if isOurAnnotation(k) && len(v) > maxAnnotationBytes {
				return nil, fmt.Errorf("%w: Node %s has an annotation %s of %d bytes (at most %d are read)", etcd.ErrTooLarge, n.Name, etcd.SanitizeText(k, etcd.MaxTextBytes), len(v), maxAnnotationBytes)
			}
		}
		_, _ = TrimNode(n)
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return nodes, nil
}

// readError classifies a failed read of the workload apiserver: refused by RBAC is a
// configuration problem (ErrInvalidInput), anything else means it cannot be read
// (ErrUnreachable).
func readError(err error, what string) error {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return fmt.Errorf("%w: %s: the workload apiserver refused it: %w", etcd.ErrInvalidInput, what, err)
	}
	return fmt.Errorf("%w: %s: the workload apiserver cannot be read: %w", etcd.ErrUnreachable, what, err)
}
