package etcdcluster

import (
	"fmt"
	"os"

	"github.com/etcd-adapter/etcd-adapter/test/env/pki"
)

// DefaultIP is the address members listen on unless a MemberSpec says otherwise.
const DefaultIP = "127.0.0.1"

// Timing defaults. They are ten times shorter than etcd's (100 ms / 1 s) so that a cluster
// elects a leader within a few hundred milliseconds, yet long enough that a busy 2-core CI
// machine does not flap leaders.
const (
	DefaultTickMs     = 50
	DefaultElectionMs = 500
)

// MemberSpec describes one member.
type MemberSpec struct {
	// NodeName is the Node that hosts the member; its certificates are issued for this name.
	NodeName string
	// MemberName is the etcd member name. Empty means NodeName, as kubeadm does; K3s appends
	// a suffix.
	MemberName string
	// IP is the loopback address the member listens on; empty means DefaultIP. Any 127.0.0.0/8
	// address works on Linux without configuration.
	IP string
	// AdvertiseClientURLs are client URLs the member reports in the member list besides its
	// own. etcd advertises what it is told, listening there or not (--advertise-client-urls),
	// so a member can point whoever follows its member list at any address.
	AdvertiseClientURLs []string
}

// Options configures a cluster.
type Options struct {
	// Members lists the members; see Nodes for the common case. It must not be empty.
	Members []MemberSpec
	// CA signs every certificate; nil means a new CA.
	CA *pki.CA
	// TickMs and ElectionMs are etcd's heartbeat and election timeouts; zero means
	// DefaultTickMs and DefaultElectionMs.
	TickMs, ElectionMs uint
	// QuotaBackendBytes is etcd's backend quota; zero means etcd's default (2 GiB).
	QuotaBackendBytes int64
	// DisableStrictReconfigCheck turns off etcd's --strict-reconfig-check. With it on (etcd's
	// default and production's), etcd refuses membership changes with "unhealthy cluster"
	// until the receiving member has been connected to a quorum for 5 s, e.g. right after a
	// cluster started. Note: the adapter must cope with that refusal, so leave it on unless a
	// test is about something else and the 5 s matter.
	DisableStrictReconfigCheck bool
	// Dir is the parent of the cluster's temporary directory; empty means os.TempDir().
	Dir string
	// Binary, when set, runs each member as a process of its own from this etcd binary, with
	// the same TLS, names and timing as in process, instead of embedding go.etcd.io/etcd/server
	// (see BinaryEnvVar). Such a cluster records no MemberRemoveCalls: its gRPC server is out of
	// reach.
	Binary string
}

// BinaryEnvVar names the etcd binary that every cluster whose Options name none runs as
// processes (Options.Binary); make test-compat sets it to each etcd version of the
// compatibility matrix. Unset, members run in process.
const BinaryEnvVar = "ETCD_ADAPTER_ETCD_BINARY"

// VersionEnvVar names the etcd version (e.g. 3.5.35) that every member started from
// BinaryEnvVar must report: Start fails when one reports another, so the matrix cannot pass on
// a binary other than the one it names.
const VersionEnvVar = "ETCD_ADAPTER_ETCD_VERSION"

// Nodes returns n member specs for Nodes named "<prefix>-0" ... "<prefix>-<n-1>".
func Nodes(prefix string, n int) []MemberSpec {
	specs := make([]MemberSpec, n)
	for i := range specs {
		specs[i] = MemberSpec{NodeName: fmt.Sprintf("%s-%d", prefix, i)}
	}
	return specs
}

// withDefaults fills the empty fields of the options and of each member spec.
func (o Options) withDefaults() (Options, error) {
	if len(o.Members) == 0 {
		return o, fmt.Errorf("invalid options: no members")
	}
	if o.TickMs == 0 {
		o.TickMs = DefaultTickMs
	}
	if o.ElectionMs == 0 {
		o.ElectionMs = DefaultElectionMs
	}
	if o.Binary == "" {
		o.Binary = os.Getenv(BinaryEnvVar)
	}
	if o.Binary != "" {
		info, err := os.Stat(o.Binary)
		if err != nil {
			return o, fmt.Errorf("invalid options: etcd binary %q is not an executable file: %w", o.Binary, err)
		}
		if info.IsDir() || info.Mode().Perm()&0o111 == 0 {
			return o, fmt.Errorf("invalid options: etcd binary %q is not an executable file", o.Binary)
		}
	}
	specs := make([]MemberSpec, len(o.Members))
	for i, s := range o.Members {
		specs[i] = s.withDefaults()
	}
	o.Members = specs
	if o.CA != nil {
		return o, nil
	}
	ca, err := pki.NewCA()
	if err != nil {
		return o, err
	}
	o.CA = ca
	return o, nil
}

// withDefaults fills MemberName and IP.
func (s MemberSpec) withDefaults() MemberSpec {
	if s.MemberName == "" {
		s.MemberName = s.NodeName
	}
	if s.IP == "" {
		s.IP = DefaultIP
	}
	return s
}
