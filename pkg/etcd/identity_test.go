package etcd

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestMembersOfMachine(t *testing.T) {
	bound := Machine{Name: "m-cp-0", NodeName: "cp-0", Addresses: []string{"10.0.0.10", "cp-0.example"}}
	other := Machine{Name: "m-cp-1", NodeName: "cp-1", Addresses: []string{"10.0.0.11"}}
	tests := []struct {
		name    string
		members []Member
		machine Machine
		wantIDs []uint64
	}{
		{"A member the backend placed on the Machine's Node belongs to it",
			[]Member{{ID: 1, Name: "x", NodeName: "cp-0"}, {ID: 2, Name: "cp-1", NodeName: "cp-1"}}, bound, []uint64{1}},
		{"A kubeadm member named after the Machine's Node belongs to it when the Node object is gone",
			[]Member{{ID: 1, Name: "cp-0"}}, bound, []uint64{1}},
		{"A member named after the Machine belongs to it",
			[]Member{{ID: 1, Name: "m-cp-0"}}, Machine{Name: "m-cp-0"}, []uint64{1}},
		{"A K3s member named <node>-<8 hex> belongs to the Machine of that Node",
			[]Member{{ID: 1, Name: "cp-0-1a2b3c4d"}, {ID: 2, Name: "cp-1-1a2b3c4d"}}, bound, []uint64{1}},
		{"A K3s member named after the Machine (its Node never registered) belongs to it",
			[]Member{{ID: 1, Name: "m-cp-0-0000abcd"}}, Machine{Name: "m-cp-0"}, []uint64{1}},
		{"A name that only starts with the Node's name is not the Machine's",
			[]Member{{ID: 1, Name: "cp-0-1a2b3c4"}, {ID: 2, Name: "cp-0-1A2B3C4D"}, {ID: 3, Name: "cp-01"}, {ID: 4, Name: "cp-0-1a2b3c4dx"}}, bound, nil},
		{"A member whose peer URL is on one of the Machine's addresses belongs to it (a learner that never started)",
			[]Member{{ID: 1, PeerURLs: []string{"https://10.0.0.10:2380"}}}, Machine{Name: "m-cp-0", Addresses: []string{"10.0.0.10"}}, []uint64{1}},
		{"Peer URL host names compare without case",
			[]Member{{ID: 1, PeerURLs: []string{"https://CP-0.example:2380"}}}, bound, []uint64{1}},
		{"IPv6 peer URLs compare as addresses",
			[]Member{{ID: 1, PeerURLs: []string{"https://[fd00::0a]:2380"}}}, Machine{Name: "m", Addresses: []string{"fd00::a"}}, []uint64{1}},
		{"A member named for another Machine is not taken by address (an address reused by a new Machine)",
			[]Member{{ID: 1, Name: "cp-1", NodeName: "cp-1", PeerURLs: []string{"https://10.0.0.10:2380"}}}, bound, nil},
		{"A Machine without Node, name match or addresses has no member",
			[]Member{{ID: 1, Name: "cp-1", NodeName: "cp-1"}, {ID: 2}}, Machine{Name: "m-new"}, nil},
		{"An unparsable peer URL matches nothing",
			[]Member{{ID: 1, PeerURLs: []string{"://"}}}, bound, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var ids []uint64
			for _, mb := range MembersOfMachine(tt.members, []Machine{bound, other, tt.machine}, tt.machine) {
				ids = append(ids, mb.ID)
			}
			g.Expect(ids).To(Equal(tt.wantIDs))
		})
	}
}

func TestBelongsToMachine(t *testing.T) {
	machines := []Machine{{Name: "m-cp-0", NodeName: "cp-0", Addresses: []string{"10.0.0.10"}}}
	tests := []struct {
		name   string
		member Member
		want   bool
	}{
		{"A member named after a Machine's Node belongs, whatever Node hosts it", Member{ID: 1, Name: "cp-0"}, true},
		{"A K3s member of a Machine's Node belongs", Member{ID: 1, Name: "cp-0-0123abcd"}, true},
		{"A member on no Machine's Node and named for none does not", Member{ID: 1, Name: "cp-9", NodeName: "cp-9"}, false},
		{"An address alone does not tie a member to a Machine", Member{ID: 1, PeerURLs: []string{"https://10.0.0.10:2380"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(BelongsToMachine(tt.member, machines)).To(Equal(tt.want))
		})
	}
}

func TestMembersPossiblyOf(t *testing.T) {
	placed := Machine{Name: "m-cp-0", NodeName: "cp-0", Addresses: []string{"10.0.0.10"}}
	bare := Machine{Name: "etcd-2"}
	tests := []struct {
		name    string
		members []Member
		machine Machine
		wantIDs []uint64
	}{
		{"An external member with a peer URL, claimed by no Machine, may be that of a Machine without addresses",
			[]Member{{ID: 1, Name: "etcd-0", PeerURLs: []string{"https://10.0.0.10:2380"}}, {ID: 3, Name: "etcd-9", PeerURLs: []string{"https://10.0.0.12:2380"}}}, bare, []uint64{3}},
		{"Once the Machine reports addresses, a member on another address is not its",
			[]Member{{ID: 3, Name: "etcd-9", PeerURLs: []string{"https://10.0.0.12:2380"}}}, Machine{Name: "etcd-2", Addresses: []string{"10.0.0.13"}}, nil},
		{"A member placed on a Node is not that of a Machine on another Node",
			[]Member{{ID: 3, Name: "cp-9", NodeName: "cp-9", PeerURLs: []string{"https://10.0.0.12:2380"}}}, Machine{Name: "m-cp-2", NodeName: "cp-2"}, nil},
		{"A member placed on a Node may be that of a Machine whose Node is not known yet",
			[]Member{{ID: 3, Name: "cp-9", NodeName: "cp-9"}}, bare, []uint64{3}},
		{"A member that never started holds nothing: it is left to the ghost clean-up, not waited for",
			[]Member{{ID: 4}, {ID: 5, PeerURLs: []string{"https://10.0.0.12:2380"}}}, bare, nil},
		{"A member another Machine claims by name or address is never this Machine's",
			[]Member{{ID: 1, Name: "cp-0", NodeName: "cp-0"}, {ID: 2, PeerURLs: []string{"https://10.0.0.10:2380"}}}, bare, nil},
		{"A member tied to this Machine is for MembersOfMachine, not here",
			[]Member{{ID: 5, Name: "etcd-2"}}, bare, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var ids []uint64
			for _, mb := range MembersPossiblyOf(tt.members, []Machine{placed, tt.machine}, tt.machine) {
				ids = append(ids, mb.ID)
			}
			g.Expect(ids).To(Equal(tt.wantIDs))
		})
	}
}
