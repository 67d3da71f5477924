// Package membershiptest holds the cases every backend built on pkg/internal/membership runs
// through its own observation: the rules pkg/kubeadm and pkg/external once decided differently.
package membershiptest

import (
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Reply is what one member says when asked. The backend asks it at a place of its own (a Node
// named after the member, an endpoint that is the member's client URL), derived from Self.
type Reply struct {
	Self, Cluster, Leader, Term uint64
	// Members are the IDs of the member's own member list.
	Members []uint64
}

// Case is one set of replies and what the backend's snapshot must say about them.
type Case struct {
	Name    string
	Replies []Reply
	// Known is the cluster ID the backend saw first; zero for a first observation.
	Known uint64
	// WantErr, when set, is the error class the observation fails with, and WantText a part
	// of its message.
	WantErr     error
	WantText    string
	WantLeader  uint64
	WantMembers []uint64
}

// Divergences are the cases of the rules the backends once decided differently.
func Divergences() []Case {
	return []Case{
		{
			Name: "member list: the leader's own list, although most members still report the one before the change",
			Replies: []Reply{
				{Self: 1, Cluster: 7, Leader: 1, Term: 3, Members: []uint64{1, 2, 3}},
				{Self: 2, Cluster: 7, Leader: 1, Term: 3, Members: []uint64{1, 2, 3, 4}},
				{Self: 3, Cluster: 7, Leader: 1, Term: 3, Members: []uint64{1, 2, 3, 4}},
			},
			WantLeader: 1, WantMembers: []uint64{1, 2, 3},
		},
		{
			Name: "member list: with no member saying it leads, the list most members report",
			Replies: []Reply{
				{Self: 1, Cluster: 7, Members: []uint64{1, 2}},
				{Self: 2, Cluster: 7, Members: []uint64{1, 2, 3}},
				{Self: 3, Cluster: 7, Members: []uint64{1, 2, 3}},
			},
			WantMembers: []uint64{1, 2, 3},
		},
		{
			Name: "cluster ID: two reported equally often on a first observation are refused, not guessed",
			Replies: []Reply{
				{Self: 1, Cluster: 7, Leader: 1, Term: 2, Members: []uint64{1, 2}},
				{Self: 9, Cluster: 8, Leader: 9, Term: 2, Members: []uint64{9}},
			},
			WantErr: etcd.ErrInvalidInput, WantText: "equal numbers",
		},
		{
			Name: "cluster ID: the one seen first decides, whatever the others say",
			Replies: []Reply{
				{Self: 1, Cluster: 7, Leader: 1, Term: 2, Members: []uint64{1, 2}},
				{Self: 9, Cluster: 8, Leader: 9, Term: 2, Members: []uint64{9}},
			},
			Known:      7,
			WantLeader: 1, WantMembers: []uint64{1, 2},
		},
		{
			Name: "leadership: two members that say they lead in the same term give no leader, and the list most members report",
			Replies: []Reply{
				{Self: 1, Cluster: 7, Leader: 1, Term: 5, Members: []uint64{1, 2, 3}},
				{Self: 2, Cluster: 7, Leader: 2, Term: 5, Members: []uint64{1, 2}},
				{Self: 3, Cluster: 7, Leader: 1, Term: 5, Members: []uint64{1, 2, 3}},
			},
			WantLeader: 0, WantMembers: []uint64{1, 2, 3},
		},
		{
			Name: "leadership: of two members that say they lead, the one in the higher term",
			Replies: []Reply{
				{Self: 1, Cluster: 7, Leader: 1, Term: 4, Members: []uint64{1, 2, 3}},
				{Self: 2, Cluster: 7, Leader: 2, Term: 5, Members: []uint64{1, 2, 3}},
				{Self: 3, Cluster: 7, Leader: 2, Term: 5, Members: []uint64{1, 2, 3}},
			},
			WantLeader: 2, WantMembers: []uint64{1, 2, 3},
		},
	}
}
