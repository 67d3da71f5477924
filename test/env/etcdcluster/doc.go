// Package etcdcluster runs real etcd clusters for tests: N members (1, 3, 5, 7) in process
// from go.etcd.io/etcd/server/v3/embed, or as processes of an etcd binary of another version
// (Options.Binary, BinaryEnvVar; make test-compat), on loopback, with client and peer TLS and
// client certificate authentication, all signed by one pki.CA. Each member is named after the Node
// that hosts it, because kubeadm names etcd members after their Node and Cluster API relies
// on that.
//
// Besides starting and closing clusters, the package has fault handles that the adapter's
// tests need: stop, kill, restart and wipe a member, a NOSPACE alarm, a ghost learner that
// never starts, a separate single-member cluster (split-brain target) and a new learner
// that joins and is promoted. The alarm handles (RaiseNoSpace, DisarmAlarms) return only once
// every running member, asked alone (AlarmsByMember), reports the change.
//
// Note: several clusters may run in one process. etcd keeps some global state (Prometheus
// metrics, the gRPC logger); it tolerates many servers, so nothing here resets it.
package etcdcluster
