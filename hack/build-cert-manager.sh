#!/usr/bin/env bash
# Builds cert-manager's controller and CA injector (hack/tools/cert-manager, over the packages of
# github.com/cert-manager/cert-manager) from the Go module proxy into one directory keyed by the
# cert-manager version and the tool module's sources, and reuses it when present, so the install
# test with real cert-manager (test/certmanager) does not rebuild them each run. Nothing is
# downloaded from anywhere but the Go module proxy.
#
# Usage: hack/build-cert-manager.sh <cache-dir>
# Prints the resulting directory (holding controller and cainjector) on stdout.
set -euo pipefail

cache=${1:?usage: $0 <cache-dir>}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="${root}/hack/tools/cert-manager"

export CGO_ENABLED=0 GOFLAGS=-mod=readonly GOWORK=off

version=$(awk '$1 == "github.com/cert-manager/cert-manager" {print $2}' "${src}/go.mod")
sum=$(cat "${src}/go.mod" "${src}/go.sum" "${src}/controller/"*.go "${src}/cainjector/"*.go | sha256sum | cut -c1-12)
dest="${cache}/cert-manager-${version}-${sum}"

if [[ -x "${dest}/controller" && -x "${dest}/cainjector" ]]; then
	echo "${dest}"
	exit 0
fi

mkdir -p "${cache}"
tmp=$(mktemp -d "${cache}/.build.XXXXXX")
trap 'rm -rf "${tmp}"' EXIT

echo "building cert-manager ${version} (controller, cainjector) into ${dest}" >&2
(cd "${src}" &&
	go build -trimpath -ldflags "-s -w" -o "${tmp}/controller" ./controller &&
	go build -trimpath -ldflags "-s -w" -o "${tmp}/cainjector" ./cainjector)

mkdir -p "${dest}"
mv "${tmp}/controller" "${tmp}/cainjector" "${dest}/"
echo "${dest}"
