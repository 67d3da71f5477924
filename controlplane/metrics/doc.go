// Package metrics defines etcd-adapter's Prometheus metrics, registered in controller-runtime's
// registry so the manager's metrics endpoint serves them next to controller-runtime's own.
//
// Two kinds:
//
//   - Gauges read from the objects at scrape time (StatusCollector): members by role and health,
//     fault tolerance, pre-terminate hooks waiting, and Machines by their EtcdAdapterMemberHealthy
//     status, per Cluster. They are exactly what the ControlPlaneEtcd status and the Machines
//     say, so they never disagree with `kubectl get`.
//   - Histograms recorded where the thing happens: RecordObservation (one etcd observation, per
//     backend) by the controllers, and RecordRemoval (one member removal, from its start to its
//     end) by RemovalRecorder, which watches ControlPlaneEtcd status changes.
package metrics
