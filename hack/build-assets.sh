#!/usr/bin/env bash
# Builds the envtest binaries (kube-apiserver, etcd, and kubectl and clusterctl, with which
# test/docs and test/clusterctl run the docs' command blocks) from the Go module proxy into one
# directory keyed by version, so KUBEBUILDER_ASSETS can point at it, and the parent-death wrappers
# through which test/env starts them (parent-death/kube-apiserver, parent-death/etcd; see
# hack/tools/parent-death). Only what is missing is built: existing binaries are reused as they
# are, clusterctl while it was built from the Cluster API version hack/tools/clusterctl/go.mod
# names; the wrappers (seconds) are rebuilt when their source is newer. Nothing is downloaded from
# anywhere but the Go module proxy.
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

export CGO_ENABLED=0 GOFLAGS=-mod=readonly GOWORK=off

# clusterctl is Cluster API's, at the version of its tool module (hack/tools/clusterctl).
clusterctl_src="${root}/hack/tools/clusterctl"
CLUSTERCTL_VERSION=$(awk '$1 == "require" && $2 == "sigs.k8s.io/cluster-api" {print $3}' "${clusterctl_src}/go.mod")

wrappers="${dest}/parent-death"
wrapper_src="${root}/hack/tools/parent-death"

# wrappers_current says whether both wrappers exist and are newer than every file of their source.
wrappers_current() {
	local f w
	for w in kube-apiserver etcd; do
		[[ -x "${wrappers}/${w}" ]] || return 1
		for f in "${wrapper_src}"/*; do
			[[ "${f}" -nt "${wrappers}/${w}" ]] && return 1
		done
	done
	return 0
}

# build_wrappers builds the wrapper once and installs a copy per binary; each copy is renamed
# into place, so a test starting a wrapper meanwhile runs either the old or the new one.
build_wrappers() {
	local tmp
	mkdir -p "${wrappers}"
	tmp=$(mktemp -d "${wrappers}/.build.XXXXXX")
	echo "building the parent-death wrappers into ${wrappers}" >&2
	(cd "${wrapper_src}" && go build -trimpath -ldflags "-s -w" -o "${tmp}/wrapper" .)
	cp "${tmp}/wrapper" "${tmp}/kube-apiserver"
	mv "${tmp}/wrapper" "${tmp}/etcd"
	mv "${tmp}/kube-apiserver" "${tmp}/etcd" "${wrappers}/"
	rm -rf "${tmp}"
}

# clusterctl_current says whether the clusterctl in dest was built from CLUSTERCTL_VERSION (the
# module version go records in the binary; running `clusterctl version` would check GitHub).
clusterctl_current() {
	[[ -x "${dest}/clusterctl" ]] &&
		[[ "$(go version -m "${dest}/clusterctl" 2>/dev/null | awk '($1 == "mod" || $1 == "dep") && $2 == "sigs.k8s.io/cluster-api" {print $3}')" == "${CLUSTERCTL_VERSION}" ]]
}

if [[ -x "${dest}/kube-apiserver" && -x "${dest}/etcd" && -x "${dest}/kubectl" ]] && clusterctl_current; then
	wrappers_current || build_wrappers
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

# kube-apiserver and kubectl come from the same k8s.io/kubernetes module (hack/tools/kube-apiserver).
for cmd in kube-apiserver kubectl; do
	[[ -x "${dest}/${cmd}" ]] && continue
	echo "building ${cmd} ${K8S_VERSION} into ${dest}" >&2
	(cd "${root}/hack/tools/kube-apiserver" &&
		go build -trimpath -ldflags "${k8s_ldflags}" -o "${tmp}/${cmd}" "k8s.io/kubernetes/cmd/${cmd}")
done

if [[ ! -x "${dest}/etcd" ]]; then
	echo "building etcd ${ETCD_VERSION} into ${dest}" >&2
	(cd "${root}/hack/tools/etcd" &&
		go build -trimpath -ldflags "-s -w" -o "${tmp}/etcd" .)
fi

if ! clusterctl_current; then
	echo "building clusterctl ${CLUSTERCTL_VERSION} into ${dest}" >&2
	cver=sigs.k8s.io/cluster-api/version
	cminor=${CLUSTERCTL_VERSION#v*.}
	cmajor=${CLUSTERCTL_VERSION#v}
	(cd "${clusterctl_src}" &&
		go build -trimpath -ldflags "-s -w -X ${cver}.gitVersion=${CLUSTERCTL_VERSION} -X ${cver}.gitMajor=${cmajor%%.*} -X ${cver}.gitMinor=${cminor%%.*} -X ${cver}.gitTreeState=clean -X ${cver}.buildDate=${now}" \
			-o "${tmp}/clusterctl" sigs.k8s.io/cluster-api/cmd/clusterctl)
fi

mkdir -p "${dest}"
for f in "${tmp}"/*; do
	[[ -e "${f}" ]] && mv "${f}" "${dest}/"
done
wrappers_current || build_wrappers
echo "${dest}"
