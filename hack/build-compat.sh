#!/usr/bin/env bash
# Builds one binary of the compatibility matrix (make test-compat) from the Go module proxy into
# a cache keyed by version, and prints its path. The versions are those of the tools modules:
#
#   etcd v3.5            hack/tools/compat/etcd-v3.5
#   etcd v3.6            hack/tools/etcd (the version the test environment runs)
#   etcd v3.7            hack/tools/compat/etcd-v3.7
#   kube-apiserver v1.31 hack/tools/compat/kube-apiserver-v1.31
#   kube-apiserver v1.37 hack/tools/compat/kube-apiserver-v1.37
#
# A kube-apiserver gets the parent-death wrapper beside it (parent-death/kube-apiserver, from
# hack/tools/parent-death), through which test/env starts it so that it ends with the test.
#
# A tools module whose go.mod names a toolchain line is built with that toolchain
# (GOTOOLCHAIN, fetched by the go command from the module proxy), for that build only. A binary
# in the cache is reused as it is. A build that fails ends the script with the go command's
# error: the matrix never runs without one of its binaries.
#
# Usage: hack/build-compat.sh <cache-dir> etcd|kube-apiserver <minor, e.g. v3.5 or v1.31>
set -euo pipefail

cache=${1:?usage: $0 <cache-dir> etcd|kube-apiserver <minor>}
name=${2:?usage: $0 <cache-dir> etcd|kube-apiserver <minor>}
minor=${3:?usage: $0 <cache-dir> etcd|kube-apiserver <minor>}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

case "${name}" in
etcd)
	module=go.etcd.io/etcd/server/v3
	pkg=.
	dir="${root}/hack/tools/compat/etcd-${minor}"
	[[ "${minor}" == v3.6 ]] && dir="${root}/hack/tools/etcd"
	;;
kube-apiserver)
	module=k8s.io/kubernetes
	pkg=k8s.io/kubernetes/cmd/kube-apiserver
	dir="${root}/hack/tools/compat/kube-apiserver-${minor}"
	;;
*)
	echo "build-compat: unknown binary ${name} (etcd or kube-apiserver)" >&2
	exit 2
	;;
esac
if [[ ! -f "${dir}/go.mod" ]]; then
	echo "build-compat: no tools module for ${name} ${minor} (${dir#"${root}/"}/go.mod)" >&2
	exit 2
fi

# The version is the one the tools module requires.
version=$(awk -v m="${module}" '$1 != "replace" && $1 != "=>" { for (i = 1; i < NF; i++) if ($i == m && $(i + 1) ~ /^v/) { print $(i + 1); exit } }' "${dir}/go.mod")
if [[ -z "${version}" || "${version}" != "${minor}".* ]]; then
	echo "build-compat: ${dir#"${root}/"}/go.mod requires ${module} ${version:-at no version}, not ${minor}.x" >&2
	exit 2
fi
dest="${cache}/${name}-${version}"
export CGO_ENABLED=0 GOFLAGS=-mod=readonly GOWORK=off

# install_wrapper builds the parent-death wrapper for a kube-apiserver into its directory.
install_wrapper() {
	[[ "${name}" == kube-apiserver && ! -x "${dest}/parent-death/${name}" ]] || return 0
	local tmp
	mkdir -p "${dest}/parent-death"
	tmp=$(mktemp -d "${dest}/parent-death/.build.XXXXXX")
	(cd "${root}/hack/tools/parent-death" && GOTOOLCHAIN=local go build -trimpath -ldflags "-s -w" -o "${tmp}/${name}" .)
	mv "${tmp}/${name}" "${dest}/parent-death/${name}"
	rm -rf "${tmp}"
}

if [[ -x "${dest}/${name}" ]]; then
	install_wrapper
	echo "${dest}/${name}"
	exit 0
fi
toolchain=$(awk '$1 == "toolchain" {print $2; exit}' "${dir}/go.mod")
if [[ -n "${toolchain}" ]]; then
	export GOTOOLCHAIN="${toolchain}"
fi

ldflags="-s -w"
if [[ "${name}" == kube-apiserver ]]; then
	major=${version#v}
	major=${major%%.*}
	kminor=${version#v*.}
	kminor=${kminor%%.*}
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X ${p}.gitVersion=${version} -X ${p}.gitMajor=${major} -X ${p}.gitMinor=${kminor}"
		ldflags+=" -X ${p}.gitTreeState=clean -X ${p}.buildDate=${now}"
	done
fi

mkdir -p "${cache}"
tmp=$(mktemp -d "${cache}/.build.XXXXXX")
trap 'rm -rf "${tmp}"' EXIT
echo "building ${name} ${version} into ${dest}${toolchain:+ with ${toolchain}}" >&2
start=${SECONDS}
(cd "${dir}" && go build -trimpath -ldflags "${ldflags}" -o "${tmp}/${name}" "${pkg}")
mkdir -p "${dest}"
mv "${tmp}/${name}" "${dest}/${name}"
install_wrapper
echo "built ${name} ${version} in $((SECONDS - start)) s" >&2
echo "${dest}/${name}"
