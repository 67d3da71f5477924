#!/usr/bin/env bash
# Builds the envtest binaries (kube-apiserver, etcd) from the Go module proxy into one directory
# keyed by version, so KUBEBUILDER_ASSETS can point at it. An existing, complete directory is
# reused as is. Nothing is downloaded from anywhere but the Go module proxy.
#
# Usage: hack/build-assets.sh <assets-cache-dir>
# Prints the resulting directory on stdout.
set -euo pipefail

# Keep these in step with hack/tools/*/go.mod and test/env (assets.go).
K8S_VERSION=v1.36.3
ETCD_VERSION=v3.6.14

cache=${1:?usage: $0 <assets-cache-dir>}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest="${cache}/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}"

if [[ -x "${dest}/kube-apiserver" && -x "${dest}/etcd" ]]; then
	echo "${dest}"
	exit 0
fi

mkdir -p "${cache}"
tmp=$(mktemp -d "${cache}/.build.XXXXXX")
trap 'rm -rf "${tmp}"' EXIT

minor=${K8S_VERSION#v*.}
minor=${minor%%.*}
major=${K8S_VERSION#v}
major=${major%%.*}
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
kver=k8s.io/component-base/version
cver=k8s.io/client-go/pkg/version
k8s_ldflags="-s -w"
for pkg in ${kver} ${cver}; do
	k8s_ldflags+=" -X ${pkg}.gitVersion=${K8S_VERSION}"
	k8s_ldflags+=" -X ${pkg}.gitMajor=${major} -X ${pkg}.gitMinor=${minor}"
	k8s_ldflags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=${now}"
done

export CGO_ENABLED=0 GOFLAGS=-mod=readonly GOWORK=off

echo "building kube-apiserver ${K8S_VERSION} into ${dest}" >&2
(cd "${root}/hack/tools/kube-apiserver" &&
	go build -trimpath -ldflags "${k8s_ldflags}" -o "${tmp}/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)

echo "building etcd ${ETCD_VERSION} into ${dest}" >&2
(cd "${root}/hack/tools/etcd" &&
	go build -trimpath -ldflags "-s -w" -o "${tmp}/etcd" .)

mkdir -p "${dest}"
mv "${tmp}/kube-apiserver" "${tmp}/etcd" "${dest}/"
echo "${dest}"
