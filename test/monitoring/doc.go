// Package monitoring tests what etcd-adapter ships for Prometheus and Grafana with Prometheus's
// own tools, built from the Prometheus module by hack/build-promtool.sh: the alert rules
// (config/prometheus/rules) with `promtool check rules` and `promtool test rules`, and the
// dashboard (config/grafana) with Prometheus's PromQL parser, against the metric names the
// manager registers (metrics.SeriesNames).
package monitoring
