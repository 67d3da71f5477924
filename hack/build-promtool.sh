#!/usr/bin/env bash
# Builds Prometheus's promtool and promql-metrics (hack/tools/promtool) from the Go module proxy
# into one directory keyed by the Prometheus version and the tool module's go.sum, and reuses it
# when present, so the alert and dashboard tests (test/monitoring) do not rebuild them each run.
# Nothing is downloaded from anywhere but the Go module proxy.
#
# Usage: hack/build-promtool.sh <cache-dir>
# Prints the resulting directory (holding promtool and promql-metrics) on stdout.
set -euo pipefail

cache=${1:?usage: $0 <cache-dir>}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="${root}/hack/tools/promtool"

export CGO_ENABLED=0 GOFLAGS=-mod=readonly GOWORK=off

version=$(awk '$1 == "require" && $2 == "github.com/prometheus/prometheus" {print $3}' "${src}/go.mod")
sum=$(cat "${src}/go.mod" "${src}/go.sum" "${src}/promql-metrics/"*.go | sha256sum | cut -c1-12)
dest="${cache}/prometheus-${version}-${sum}"

if [[ -x "${dest}/promtool" && -x "${dest}/promql-metrics" ]]; then
	echo "${dest}"
	exit 0
fi

mkdir -p "${cache}"
tmp=$(mktemp -d "${cache}/.build.XXXXXX")
trap 'rm -rf "${tmp}"' EXIT

echo "building promtool ${version} into ${dest}" >&2
(cd "${src}" &&
	go build -trimpath -ldflags "-s -w" -o "${tmp}/promtool" github.com/prometheus/prometheus/cmd/promtool &&
	go build -trimpath -ldflags "-s -w" -o "${tmp}/promql-metrics" ./promql-metrics)

mkdir -p "${dest}"
mv "${tmp}/promtool" "${tmp}/promql-metrics" "${dest}/"
echo "${dest}"
