#!/usr/bin/env bash
# The compatibility matrix (make test-compat, docs/compatibility.md):
#
#   - for each etcd version of COMPAT_ETCD: the etcd.Cluster conformance suite of the kubeadm
#     backend (behind the workload apiserver's port-forward and the kubelet stand-ins) and of the
#     external backend (direct dial), every workload etcd a multi-member TLS cluster of etcd
#     processes of that version (test/env/etcdcluster, Options.Binary);
#   - for each Kubernetes version of COMPAT_KUBERNETES: the workload apiserver of that version,
#     the protocol its port-forward reached the kubelets in (TestPortForwardProtocol) and the
#     kubeadm backend's conformance suite through it.
#
# Binaries come from hack/build-compat.sh (built once per version, cached). Each run asserts
# that its processes report the version it names (ETCD_ADAPTER_ETCD_VERSION,
# ETCD_ADAPTER_WORKLOAD_KUBERNETES_VERSION), and counts only tests that ran and passed: a binary
# that cannot be built, a test that did not run, was skipped or failed fails the matrix. A
# summary line per run, with its wall time, ends the output; the runs' logs stay in
# COMPAT_LOGDIR.
#
# Usage: hack/test-compat.sh <envtest-assets-dir> <compat-cache-dir>
set -uo pipefail

assets=${1:?usage: $0 <envtest-assets-dir> <compat-cache-dir>}
cache=${2:?usage: $0 <envtest-assets-dir> <compat-cache-dir>}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
etcd_versions=${COMPAT_ETCD-v3.5 v3.6 v3.7}
k8s_versions=${COMPAT_KUBERNETES-v1.31 v1.37}
logdir=${COMPAT_LOGDIR:-$(mktemp -d "${TMPDIR:-/tmp}/etcd-adapter-compat.XXXXXX")}
timeout=${COMPAT_TIMEOUT:-40m}
mkdir -p "${logdir}"

results=()
failed=0

# record adds a summary line and counts a failure.
record() {
	results+=("$1")
	[[ "$1" == PASS* ]] || failed=1
}

# run_tests runs go test on pkgs (one package at a time) with the tests of run, and checks in
# its verbose output that every test of expect passed in every package, and nothing was skipped.
run_tests() {
	local label=$1 log=$2 run=$3 expect=$4
	shift 4
	local start=${SECONDS} rc=0 missing=() pkg t
	echo "== ${label}: go test $* -run '${run}' (log: ${log})"
	(cd "${root}" && KUBEBUILDER_ASSETS="${assets}" go test -p 1 -count=1 -v -timeout "${timeout}" -run "${run}" "$@") >"${log}" 2>&1 || rc=$?
	for pkg in "$@"; do
		for t in ${expect}; do
			# go test -v prints a package's results before its ok/FAIL line; one package at a time.
			awk -v pkg="github.com/etcd-adapter/etcd-adapter/${pkg#./}" -v t="${t}" '
				$0 ~ "^--- PASS: " t " " { pass = 1 }
				$1 == "ok" || $1 == "FAIL" { if ($1 == "ok" && $2 == pkg && pass) found = 1; pass = 0 }
				END { exit !found }' "${log}" || missing+=("${pkg}:${t}")
		done
	done
	local took=$((SECONDS - start))
	if grep -q -- '--- SKIP' "${log}"; then
		record "FAIL ${label} (${took} s): a test was skipped: $(grep -m3 -- '--- SKIP' "${log}" | tr -s ' ' | paste -sd';')"
	elif ((rc != 0)) || ((${#missing[@]} > 0)); then
		record "FAIL ${label} (${took} s): go test exited ${rc}; not passed: ${missing[*]:-none}; see ${log}"
	else
		record "PASS ${label} (${took} s)"
	fi
}

matrix_start=${SECONDS}
for v in ${etcd_versions}; do
	if ! bin=$("${root}/hack/build-compat.sh" "${cache}" etcd "${v}"); then
		record "FAIL etcd ${v}: the binary could not be built (hack/build-compat.sh, above)"
		continue
	fi
	version=$(basename "$(dirname "${bin}")")
	version=${version#etcd-v}
	ETCD_ADAPTER_ETCD_BINARY="${bin}" ETCD_ADAPTER_ETCD_VERSION="${version}" \
		run_tests "etcd ${version}: kubeadm and external conformance" "${logdir}/etcd-${version}.log" \
		'^TestConformance$' TestConformance ./pkg/kubeadm ./pkg/external
done
for v in ${k8s_versions}; do
	if ! bin=$("${root}/hack/build-compat.sh" "${cache}" kube-apiserver "${v}"); then
		record "FAIL kube-apiserver ${v}: the binary could not be built (hack/build-compat.sh, above)"
		continue
	fi
	version=$(basename "$(dirname "${bin}")")
	version=${version#kube-apiserver-}
	ETCD_ADAPTER_WORKLOAD_KUBE_APISERVER="${bin}" ETCD_ADAPTER_WORKLOAD_KUBERNETES_VERSION="${version}" \
		run_tests "kube-apiserver ${version}: port-forward protocol and kubeadm conformance" "${logdir}/kube-apiserver-${version}.log" \
		'^(TestPortForwardProtocol|TestConformance)$' 'TestPortForwardProtocol TestConformance' ./pkg/kubeadm
done

echo
echo "compatibility matrix ($((SECONDS - matrix_start)) s; logs in ${logdir}):"
printf '  %s\n' "${results[@]}"
exit "${failed}"
