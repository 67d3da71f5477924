package etcd

import (
	"net"
	"net/url"
	"strings"
)

// MembersOfMachine returns the members that belong to Machine m, by every identity the Machine
// has, in the order of members:
//   - the Node the backend placed the member on is the Machine's Node;
//   - the member's name is the Machine's Node name or the Machine's name (kubeadm names a member
//     after its Node, and most infrastructure providers name the Node after the Machine);
//   - the member's name is K3s's "<node>-<8 hex digits>" for the Machine's Node name or name
//     (k3s pkg/etcd/etcd.go: the suffix is chosen at first start and kept in the data dir);
//   - the host of a peer URL is one of the Machine's addresses (status.addresses), unless the
//     member's name or Node names another Machine of machines.
//
// Note: the backend's placement alone is not enough: a kubeadm member whose Node object was
// deleted (its etcd mirror Pod goes with it) is placed on no Node though it still runs, and a
// member whose Node never registered has only its name or address to tie it to its Machine.
func MembersOfMachine(members []Member, machines []Machine, m Machine) []Member {
	var out []Member
	for _, mb := range members {
		if namedFor(mb, m) || (peerOn(mb, m) && !namedForAnother(mb, machines, m)) {
			out = append(out, mb)
		}
	}
	return out
}

// BelongsToMachine reports whether the member's Node or name ties it to one of machines (not its
// address, which a new Machine may reuse).
func BelongsToMachine(mb Member, machines []Machine) bool {
	for _, m := range machines {
		if namedFor(mb, m) {
			return true
		}
	}
	return false
}

// namedFor reports whether the member's Node or name is the Machine's.
func namedFor(mb Member, m Machine) bool {
	for _, n := range []string{m.NodeName, m.Name} {
		if n == "" {
			continue
		}
		if (n == m.NodeName && mb.NodeName == n) || mb.Name == n || isK3sMemberName(mb.Name, n) {
			return true
		}
	}
	return false
}

func namedForAnother(mb Member, machines []Machine, m Machine) bool {
	for _, o := range machines {
		if o.Name != m.Name && namedFor(mb, o) {
			return true
		}
	}
	return false
}

// isK3sMemberName reports whether name is K3s's member name for the Node node:
// "<node>-<8 lower-case hex digits>".
func isK3sMemberName(name, node string) bool {
	suffix, ok := strings.CutPrefix(name, node+"-")
	if !ok || len(suffix) != 8 {
		return false
	}
	return strings.Trim(suffix, "0123456789abcdef") == ""
}

// peerOn reports whether the host of one of the member's peer URLs is one of the Machine's
// addresses.
func peerOn(mb Member, m Machine) bool {
	for _, p := range mb.PeerURLs {
		u, err := url.Parse(p)
		if err != nil || u.Hostname() == "" {
			continue
		}
		host := u.Hostname()
		for _, a := range m.Addresses {
			if sameHost(host, a) {
				return true
			}
		}
	}
	return false
}

func sameHost(a, b string) bool {
	if ipA, ipB := net.ParseIP(a), net.ParseIP(b); ipA != nil || ipB != nil {
		return ipA != nil && ipB != nil && ipA.Equal(ipB)
	}
	return strings.EqualFold(a, b)
}

// MembersPossiblyOf returns the started members that may belong to Machine m although
// MembersOfMachine does not tie them to it: no other Machine of machines claims them, and m does
// not yet report the identity that would tell: a member placed on a Node is told apart by m's
// Node, a member with a peer URL by m's addresses.
//
// Note: a member that never started holds no data and does not vote; releasing a Machine that
// may have been its host leaves a ghost, which the ghost clean-up removes once the join is over.
//
// Important! "No member belongs to the Machine" proves nothing while this is not empty. Cluster
// API copies a Machine's addresses from its infrastructure Machine on a later reconcile
// (core/reconcilers/machine machine_controller_phases.go reconcileInfrastructure, which also runs
// while the Machine is deleting), so an etcd Machine deleted right after its creation can have no
// address yet while its member runs; releasing its hook then deletes a voting member's host.
func MembersPossiblyOf(members []Member, machines []Machine, m Machine) []Member {
	var out []Member
	for _, mb := range members {
		if !mb.Started() || namedFor(mb, m) || peerOn(mb, m) || claimedByAnother(mb, machines, m) {
			continue
		}
		if toldApart(mb, m) {
			continue
		}
		out = append(out, mb)
	}
	return out
}

// claimedByAnother reports whether a Machine of machines other than m ties the member to itself.
func claimedByAnother(mb Member, machines []Machine, m Machine) bool {
	for _, o := range machines {
		if o.Name != m.Name && (namedFor(mb, o) || peerOn(mb, o)) {
			return true
		}
	}
	return false
}

// toldApart reports whether m reports an identity the member would match if it were m's: the
// Node of a placed member, or an address for a member with a peer URL host.
func toldApart(mb Member, m Machine) bool {
	if mb.NodeName != "" && m.NodeName != "" {
		return true
	}
	return len(m.Addresses) > 0 && hasPeerHost(mb)
}

func hasPeerHost(mb Member) bool {
	for _, p := range mb.PeerURLs {
		if u, err := url.Parse(p); err == nil && u.Hostname() != "" {
			return true
		}
	}
	return false
}
