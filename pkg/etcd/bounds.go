package etcd

import (
	"fmt"
)

// Bounds on what etcd-adapter reads from a workload cluster. A workload cluster's admins are not
// trusted by the management cluster, and one manager serves every Cluster: each read from a
// workload cluster has a bound, and input past it is bad input (ErrTooLarge) for that Cluster
// only, never memory the manager grows into.
const (
	// MaxMembers is the most members a member list may have. etcd recommends at most 7 voters
	// (etcd FAQ, "What is maximum cluster size?") and allows 1 learner by default
	// (--max-learners); 32 leaves room for a cluster in the middle of changes and for ghost
	// members left behind.
	MaxMembers = 32

	// MaxMemberURLs is the most peer or client URLs one member may advertise. etcd advertises
	// one URL per listener (kubeadm, etcdadm and K3s each configure one or two).
	MaxMemberURLs = 8

	// MaxMemberNameBytes is the longest member name: kubeadm and etcdadm name a member after its
	// host (a DNS subdomain, at most 253 characters), K3s after its Node plus a 9-character
	// suffix; status.members[].name allows 256.
	MaxMemberNameBytes = 256

	// MaxURLBytes is the longest peer or client URL: https://, a DNS name of at most 253
	// characters and a port fit with ample room.
	MaxURLBytes = 512

	// MaxResponseBytes is the largest gRPC message read from an etcd member
	// (clientv3.Config.MaxCallRecvMsgSize; clientv3's default is 2 GiB). The largest answer asked
	// for is a member list: MaxMembers members of MaxMemberURLs peer and client URLs of
	// MaxURLBytes each and a name is under 300 KiB; a Status answer lists one error per alarm.
	MaxResponseBytes = 1 << 20

	// MaxTextBytes is the longest string from a workload cluster (an etcd Status error, a K3s
	// condition message, the kubelet's port-forward error) kept for a status message or an
	// Event. The messages etcd, K3s and the kubelet write are one line of well under 200 bytes.
	MaxTextBytes = 512

	// MaxErrorsPerMember is the most Status errors kept for one member. etcd lists one error per
	// active alarm (NOSPACE, CORRUPT) plus its own few.
	MaxErrorsPerMember = 4

	// MaxMemberMessageBytes is the longest status.members[].message (the API allows 10240).
	MaxMemberMessageBytes = 10240

	// MaxConditionMessageBytes is the longest condition message: metav1.Condition allows 32768,
	// and a status patch with a longer one is refused, which would freeze a Cluster's reporting.
	MaxConditionMessageBytes = 32768
)

// ErrTooLarge is the class of input past a bound above: etcd-adapter reads no further, and the
// Cluster's conditions say so. It is an ErrInvalidInput: retrying without a change will not help.
var ErrTooLarge = fmt.Errorf("%w: the workload cluster sent more than etcd-adapter reads", ErrInvalidInput)

// CheckMembers returns an error wrapping ErrTooLarge when a member list is past a bound: more
// than MaxMembers members, or a member with a name, or more or longer URLs, than the bounds allow.
func CheckMembers(ms []Member) error {
	if len(ms) > MaxMembers {
		return fmt.Errorf("%w: a member list of %d members (at most %d are read)", ErrTooLarge, len(ms), MaxMembers)
	}
	for _, m := range ms {
		if len(m.Name) > MaxMemberNameBytes {
			return fmt.Errorf("%w: etcd member %x has a name of %d bytes (at most %d are read)", ErrTooLarge, m.ID, len(m.Name), MaxMemberNameBytes)
		}
		for _, urls := range [][]string{m.PeerURLs, m.ClientURLs} {
			if len(urls) > MaxMemberURLs {
				return fmt.Errorf("%w: etcd member %x advertises %d URLs of a kind (at most %d are read)", ErrTooLarge, m.ID, len(urls), MaxMemberURLs)
			}
			for _, u := range urls {
				if len(u) > MaxURLBytes {
					return fmt.Errorf("%w: etcd member %x advertises a URL of %d bytes (at most %d are read)", ErrTooLarge, m.ID, len(u), MaxURLBytes)
				}
			}
		}
	}
	return nil
}
