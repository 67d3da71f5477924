#!/usr/bin/env bash
# Builds the Cluster API Operator's manager (hack/tools/cluster-api-operator) from the Go module
# proxy into one directory keyed by the operator's version and the tool module's go.sum, beside
# the operator's CRDs (config/crd/bases) and webhook configurations (config/webhook/manifests.yaml)
# from the same module, and reuses it when present, so test/operator does not rebuild it each run.
# Nothing is downloaded from anywhere but the Go module proxy.
#
# Usage: hack/build-operator.sh <cache-dir>
# Prints the resulting directory on stdout: manager, crd/*.yaml, webhook/manifests.yaml.
set -euo pipefail

cache=${1:?usage: $0 <cache-dir>}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="${root}/hack/tools/cluster-api-operator"
module=sigs.k8s.io/cluster-api-operator

export CGO_ENABLED=0 GOFLAGS=-mod=readonly GOWORK=off

version=$(awk -v m="${module}" '$1 == "require" && $2 == m {print $3}' "${src}/go.mod")
sum=$(cat "${src}/go.mod" "${src}/go.sum" | sha256sum | cut -c1-12)
dest="${cache}/cluster-api-operator-${version}-${sum}"

if [[ -x "${dest}/manager" && -f "${dest}/webhook/manifests.yaml" ]]; then
	echo "${dest}"
	exit 0
fi

mkdir -p "${cache}"
tmp=$(mktemp -d "${cache}/.build.XXXXXX")
trap 'rm -rf "${tmp}"' EXIT

echo "building the Cluster API Operator ${version} into ${dest}" >&2
(cd "${src}" &&
	go build -trimpath -ldflags "-s -w" -o "${tmp}/manager" "${module}/cmd")
moddir=$(cd "${src}" && go list -m -f '{{.Dir}}' "${module}")
mkdir -p "${tmp}/crd" "${tmp}/webhook"
cp "${moddir}"/config/crd/bases/*.yaml "${tmp}/crd/"
cp "${moddir}/config/webhook/manifests.yaml" "${tmp}/webhook/"
chmod -R u+w "${tmp}"
chmod 755 "${tmp}"

mkdir -p "$(dirname "${dest}")"
rm -rf "${dest}"
mv "${tmp}" "${dest}"
trap - EXIT
echo "${dest}"
