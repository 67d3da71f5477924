# etcd-adapter Makefile. `make help` lists the targets.
SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := help

GO ?= go
# Test binaries (kube-apiserver, etcd) are built from the Go module proxy into a cache outside
# the repository, keyed by version, and reused when present.
ASSETS_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/etcd-adapter/assets
# The etcd and kube-apiserver binaries of the compatibility matrix (make test-compat), keyed by
# version the same way.
COMPAT_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/etcd-adapter/compat
# promtool and promql-metrics (hack/tools/promtool) are built the same way, keyed by the
# Prometheus version and the tool module's go.sum, for test/monitoring.
PROMTOOL_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/etcd-adapter/promtool
# The Cluster API Operator's manager (hack/tools/cluster-api-operator) with its CRDs and webhook
# configurations, keyed by the operator's version and the tool module's go.sum, for test/operator.
OPERATOR_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/etcd-adapter/cluster-api-operator
# cert-manager's controller and CA injector (hack/tools/cert-manager) likewise, keyed by the
# cert-manager version and the tool module's sources, for the install test with real
# cert-manager (test/clusterctl).
CERT_MANAGER_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/etcd-adapter/cert-manager

.PHONY: help
help: ## List targets.
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-18s %s\n", $$1, $$2}'

.PHONY: envtest-assets
envtest-assets: ## Build kube-apiserver, etcd, kubectl and clusterctl for the test environment into ASSETS_CACHE (once per version).
	@hack/build-assets.sh "$(ASSETS_CACHE)"

.PHONY: promtool
promtool: ## Build Prometheus's promtool and promql-metrics into PROMTOOL_CACHE (once per version).
	@hack/build-promtool.sh "$(PROMTOOL_CACHE)" >/dev/null

.PHONY: cluster-api-operator
cluster-api-operator: ## Build the Cluster API Operator's manager, CRDs and webhooks into OPERATOR_CACHE (once per version).
	@hack/build-operator.sh "$(OPERATOR_CACHE)" >/dev/null

# TEST_PKGS selects suites of the main module, e.g. `make test TEST_PKGS=./controlplane/...`, or ./test/k3sbackend for the K3s backend across every version profile (the heaviest, ~4 min).
# The longest suites start first (go test runs packages in the order given, two at a time on 2
# cores), so that test/e2e does not start last and set the wall time alone.
LONG_PKGS := ./test/e2e ./test/kcp ./test/k3sbackend ./pkg/kubeadm
TEST_PKGS ?= $(LONG_PKGS) $(shell $(GO) list ./... | grep -v -x $(foreach p,$(LONG_PKGS),-e '.*/$(p:./%=%)'))
# The real-component packages take minutes on 2 cores; go test's default 10 min per package is
# too close for a loaded machine. test/e2e, the longest, takes about 31 min on 2 cores beside the
# other packages; its limit leaves room for a loaded machine: a run over it is a hang, which the
# test environment's processes do not outlive.
TEST_TIMEOUT ?= 70m

.PHONY: cert-manager
cert-manager: ## Build cert-manager's controller and cainjector into CERT_MANAGER_CACHE (once per version).
	@hack/build-cert-manager.sh "$(CERT_MANAGER_CACHE)" >/dev/null

.PHONY: test
test: envtest-assets promtool cluster-api-operator cert-manager ## Run every test (unit, fuzz seeds, real-component suites); TEST_PKGS selects.
	KUBEBUILDER_ASSETS="$$(hack/build-assets.sh "$(ASSETS_CACHE)")" PROMTOOL_DIR="$$(hack/build-promtool.sh "$(PROMTOOL_CACHE)")" OPERATOR_DIR="$$(hack/build-operator.sh "$(OPERATOR_CACHE)")" CERT_MANAGER_DIR="$$(hack/build-cert-manager.sh "$(CERT_MANAGER_CACHE)")" $(GO) test $(TEST_PKGS) -count=1 -timeout $(TEST_TIMEOUT)
	$(if $(filter file,$(origin TEST_PKGS)),@$(MAKE) --no-print-directory test-modules)

# The modules nested in this repository, each with its own go.mod so a provider imports them at its
# own Cluster API and controller-runtime versions (docs/adopters-guide.md): the decisions
# (pkg/etcd), the K3s backend (pkg/k3s), and a provider pinned to the versions cluster-api-k3s
# uses (examples/k3sprovider). `go test ./...` at the root does not enter them; `make test` does.
NESTED_MODULES := pkg/etcd pkg/k3s examples/k3sprovider

.PHONY: test-modules
test-modules: envtest-assets ## Test the nested modules (pkg/etcd, pkg/k3s, examples/k3sprovider), each at its own versions.
	@set -e; assets="$$(hack/build-assets.sh "$(ASSETS_CACHE)")"; for m in $(NESTED_MODULES); do echo "== $$m"; (cd $$m && GOWORK=off KUBEBUILDER_ASSETS="$$assets" $(GO) test ./... -count=1 -timeout $(TEST_TIMEOUT)); done

# clusterctl's own library (init, upgrade apply, move, delete --include-crd) and the docs' install,
# upgrade and uninstall blocks with the clusterctl binary against real management apiservers, from
# releases built by release-manifests' code: test/clusterctl. `make test`
# runs it too; this target runs it alone.
.PHONY: test-clusterctl
test-clusterctl: envtest-assets cert-manager ## clusterctl init (also with real cert-manager), upgrade, move and delete of the addon (test/clusterctl).
	KUBEBUILDER_ASSETS="$$(hack/build-assets.sh "$(ASSETS_CACHE)")" CERT_MANAGER_DIR="$$(hack/build-cert-manager.sh "$(CERT_MANAGER_CACHE)")" $(GO) test ./test/clusterctl -count=1 -timeout $(TEST_TIMEOUT)

# The Cluster API Operator's own controller (a process) installs the addon as an AddonProvider
# from ConfigMaps and upgrades it, checked against what clusterctl init makes of the same release:
# test/operator. `make test` runs it too; this target runs it alone.
.PHONY: test-operator
test-operator: envtest-assets cluster-api-operator ## Install and upgrade the addon with the Cluster API Operator (test/operator).
	KUBEBUILDER_ASSETS="$$(hack/build-assets.sh "$(ASSETS_CACHE)")" OPERATOR_DIR="$$(hack/build-operator.sh "$(OPERATOR_CACHE)")" $(GO) test ./test/operator -count=1 -timeout $(TEST_TIMEOUT)

# The compatibility matrix of docs/compatibility.md, not part of `make test`: the kubeadm (behind
# the port-forward) and external conformance suites on TLS clusters of etcd processes of each
# COMPAT_ETCD version, and the port-forward protocol and kubeadm conformance suite through a
# workload kube-apiserver of each COMPAT_KUBERNETES version (hack/test-compat.sh). The binaries
# are built from the Go module proxy on first use (hack/build-compat.sh); one that cannot be
# built fails the target. COMPAT_LOGDIR keeps the runs' logs.
COMPAT_ETCD ?= v3.5 v3.6 v3.7
COMPAT_KUBERNETES ?= v1.31 v1.37
COMPAT_LOGDIR ?=
.PHONY: test-compat
test-compat: envtest-assets ## The version matrix: conformance on etcd v3.5, v3.6, v3.7 processes and through kube-apiserver v1.31 and v1.37.
	COMPAT_ETCD="$(COMPAT_ETCD)" COMPAT_KUBERNETES="$(COMPAT_KUBERNETES)" COMPAT_LOGDIR="$(COMPAT_LOGDIR)" \
	hack/test-compat.sh "$$(hack/build-assets.sh "$(ASSETS_CACHE)")" "$(COMPAT_CACHE)"

BENCHTIME ?= 1x
.PHONY: bench
bench: envtest-assets ## Benchmarks against the real test environment; they print their figures.
	KUBEBUILDER_ASSETS="$$(hack/build-assets.sh "$(ASSETS_CACHE)")" $(GO) test ./... -run '^$$' -bench . -benchtime $(BENCHTIME) -count=1 -timeout 90m

# The fleet benchmark alone: the manager binary against FLEET_SIZES K3s workload clusters
# (default 1,5,10,20), FLEET_WINDOW of CPU sampling per size (default 1m).
.PHONY: bench-fleet
bench-fleet: envtest-assets ## Manager CPU, memory, fds, goroutines and status freshness against 1..20 K3s and kubeadm clusters, with worker Nodes, and the 1,000-cluster estimate.
	KUBEBUILDER_ASSETS="$$(hack/build-assets.sh "$(ASSETS_CACHE)")" $(GO) test ./test/fleetbench -run '^$$' -bench BenchmarkFleet -benchtime 1x -count=1 -timeout 150m

# The hook-latency benchmark alone: 20 Machine deletions per backend (WaitingForPreTerminateHook →
# hook released, median and p99) and 5 member failures (failure → status says so).
.PHONY: bench-hooks
bench-hooks: envtest-assets ## Pre-terminate hook latency per backend (median, p99 of 20 deletions) and member failure → status.
	KUBEBUILDER_ASSETS="$$(hack/build-assets.sh "$(ASSETS_CACHE)")" $(GO) test ./test/hookbench -run '^$$' -bench BenchmarkHookRelease -benchtime 1x -count=1 -timeout 60m

# The member death → replacement benchmark alone: per backend, 3 members killed while their Nodes
# stay Ready, each replaced through EtcdAdapterMemberHealthy, Cluster API's MachineHealthCheck and
# an owner stand-in; prints each phase from the death.
.PHONY: bench-replacement
bench-replacement: envtest-assets ## Member death → MachineHealthCheck remediation → replacement member healthy, per backend.
	KUBEBUILDER_ASSETS="$$(hack/build-assets.sh "$(ASSETS_CACHE)")" $(GO) test ./test/hookbench -run '^$$' -bench BenchmarkMemberDeathReplacement -benchtime 1x -count=1 -timeout 60m

# The seeded soak (test/soak, build tag soak, so `make test` compiles no test there): random but
# reproducible scenarios on every
# backend until SOAK_DURATION passed (or SOAK_SCENARIOS were played), judged from etcd itself. The
# seed is printed; SOAK_SEED replays it. SOAK_BACKENDS (kubeadm,k3s,etcdadm) and SOAK_EVENTS (per
# scenario, default 6) narrow or lengthen it; the manager replicas' logs go to SOAK_LOGDIR.
SOAK_DURATION ?= 10m
SOAK_SEED ?=
SOAK_SCENARIOS ?=
SOAK_BACKENDS ?=
SOAK_EVENTS ?=
SOAK_LOGDIR ?=
.PHONY: soak
soak: envtest-assets ## Seeded soak of joins, deletions, remediations, scale-downs, member stops and manager kills (SOAK_DURATION, SOAK_SEED).
	SOAK_DURATION="$(SOAK_DURATION)" SOAK_SEED="$(SOAK_SEED)" SOAK_SCENARIOS="$(SOAK_SCENARIOS)" SOAK_BACKENDS="$(SOAK_BACKENDS)" SOAK_EVENTS="$(SOAK_EVENTS)" SOAK_LOGDIR="$(SOAK_LOGDIR)" \
	KUBEBUILDER_ASSETS="$$(hack/build-assets.sh "$(ASSETS_CACHE)")" $(GO) test -tags soak ./test/soak -run '^TestSoak$$' -count=1 -v -timeout 24h

# The demo builds the test binaries itself (with progress) when they are missing, so it needs
# nothing but Go. DEMO_ARGS are passed on, e.g. DEMO_ARGS=--keep-running.
DEMO_ARGS ?=
.PHONY: run
run: demo ## The main job: the playground and its narrated scenario (same as `make demo`).

.PHONY: demo
demo: ## Start the playground (management + K3s + kubeadm clusters, etcd-adapter) and play the scenario; DEMO_ARGS=--keep-running keeps it up.
	$(GO) run ./test/demo/cmd/etcd-adapter-demo $(DEMO_ARGS)

# MANAGER_ARGS are passed to the manager, e.g. MANAGER_ARGS="--kubeconfig=$$HOME/.kube/config --enable-webhooks=false".
MANAGER_ARGS ?= --enable-webhooks=false --insecure-diagnostics --diagnostics-address=127.0.0.1:8080 --health-addr=127.0.0.1:9440
.PHONY: run-manager
run-manager: ## Run the etcd-adapter manager against the management cluster of KUBECONFIG (MANAGER_ARGS).
	$(GO) run ./cmd/etcd-adapter $(MANAGER_ARGS)

# The components YAML and metadata.yaml clusterctl installs, built by kustomize (as a Go library)
# from config/default.
RELEASE_DIR ?= out
IMG ?= ghcr.io/etcd-adapter/etcd-adapter:dev
.PHONY: release-manifests
release-manifests: ## Build $(RELEASE_DIR)/addon-components.yaml and metadata.yaml for clusterctl (IMG sets the manager image).
	$(GO) run ./hack/release-manifests -out $(RELEASE_DIR) -image $(IMG)

# Before tagging vX.Y.Z, pkg/etcd/vX.Y.Z and pkg/k3s/vX.Y.Z: every tagged module's go.mod must
# require its siblings at that version, as Go ignores a dependency's replace directives
# (CHANGELOG.md, "Releasing the Go modules"). make test runs the check's own tests.
.PHONY: release-check
release-check: ## Refuse RELEASE_VERSION (e.g. v0.1.0) while go.mod or pkg/k3s/go.mod requires pkg/etcd or pkg/k3s at another version.
	$(GO) run ./hack/release-check -version "$(RELEASE_VERSION)"

# The manager image, built with nothing but Go (hack/image: go-containerregistry, no Docker, no base
# image) as an OCI image layout in IMAGE_DIR, for IMAGE_PLATFORMS, tagged IMG like the components
# release-manifests writes. IMAGE_VERSION and IMAGE_REVISION set the OCI labels (default: git
# describe and git rev-parse HEAD); SOURCE_DATE_EPOCH stamps it (default: the Unix epoch).
IMAGE_DIR ?= $(RELEASE_DIR)/image
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_VERSION ?=
IMAGE_REVISION ?=
IMAGE_FLAGS = -out $(IMAGE_DIR) -image $(IMG) -platforms $(IMAGE_PLATFORMS) -version "$(IMAGE_VERSION)" -revision "$(IMAGE_REVISION)" -go $(GO)
.PHONY: image
image: ## Build the manager image (linux/amd64, linux/arm64, non-root) into $(IMAGE_DIR) as an OCI layout tagged IMG.
	$(GO) run ./hack/image $(IMAGE_FLAGS)

# Credentials come from the Docker config (~/.docker/config.json, DOCKER_CONFIG), else Podman's
# auth.json (go-containerregistry's default keychain); none means an anonymous push.
.PHONY: image-push
image-push: ## Build the manager image and push it to IMG (a registry you can push to).
	$(GO) run ./hack/image $(IMAGE_FLAGS) -push

FUZZTIME ?= 60s
.PHONY: fuzz
fuzz: ## Fuzz the verdict functions for FUZZTIME (make test runs only the seed corpus).
	cd pkg/etcd && $(GO) test . -run '^$$' -fuzz FuzzVerdicts -fuzztime $(FUZZTIME)

# Developer tools, installed from the Go module proxy into bin/ on first use.
TOOLS_BIN := $(CURDIR)/bin
GOLANGCI_LINT_VERSION ?= v2.15.0
CONTROLLER_GEN_VERSION ?= v0.23.0
GOLANGCI_LINT := $(TOOLS_BIN)/golangci-lint
CONTROLLER_GEN := $(TOOLS_BIN)/controller-gen

$(GOLANGCI_LINT):
	GOBIN=$(TOOLS_BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

$(CONTROLLER_GEN):
	GOBIN=$(TOOLS_BIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

# govulncheck reports the known vulnerabilities (vuln.go.dev) that the code calls, in its modules
# and in the Go standard library of the toolchain; it needs network access to vuln.go.dev
# (GOVULNDB points elsewhere, e.g. a file:// mirror). Run with `go run` at a pinned version, so no
# binary is installed.
GOVULNCHECK_VERSION ?= v1.9.0
GOVULNDB ?= https://vuln.go.dev
.PHONY: vulncheck
vulncheck: ## Known vulnerabilities the code reaches (govulncheck; needs vuln.go.dev, or GOVULNDB).
	$(GO) run golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION) -db $(GOVULNDB) ./...
	@set -e; for m in $(NESTED_MODULES); do (cd $$m && GOWORK=off $(GO) run golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION) -db $(GOVULNDB) ./...); done

# lint runs vulncheck too; where the database cannot be reached it says so and lint goes on (a
# vulnerability found, or any other failure, fails lint).
.PHONY: lint-vulncheck
lint-vulncheck:
	@out=$$($(MAKE) --no-print-directory vulncheck 2>&1); rc=$$?; \
	if [ $$rc -eq 0 ]; then echo "govulncheck: no known vulnerability reached"; \
	elif echo "$$out" | grep -qE 'no such host|dial tcp|connection refused|i/o timeout|network is unreachable'; then \
	  echo "govulncheck did NOT run: $(GOVULNDB) cannot be reached from here (set GOVULNDB to a mirror)"; \
	else echo "$$out"; exit $$rc; fi

.PHONY: lint
lint: lint-vulncheck ## gofmt, go vet, govulncheck, golangci-lint (installed from the Go module proxy when it can be), in the nested modules too.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@set -e; for m in $(NESTED_MODULES); do (cd $$m && GOWORK=off $(GO) vet ./...); done
	@if $(MAKE) -s $(GOLANGCI_LINT) >/dev/null 2>&1; then $(GOLANGCI_LINT) run ./... && \
	  for m in $(NESTED_MODULES); do echo "golangci-lint: $$m"; (cd $$m && GOWORK=off $(GOLANGCI_LINT) run ./...) || exit 1; done; \
	else echo "golangci-lint $(GOLANGCI_LINT_VERSION) did not install from the Go module proxy; gofmt and go vet ran"; fi

# The Prometheus Operator's PrometheusRule, written from the plain rule file (the one source).
.PHONY: generate-alerts
generate-alerts: ## Write config/prometheus/alerts.yaml from config/prometheus/rules/etcd-adapter.rules.yaml.
	$(GO) run ./hack/prometheusrule

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Deepcopy, CRDs and RBAC from controller-gen markers.
	@if grep -rlq '+kubebuilder:object:root' api; then \
		$(CONTROLLER_GEN) object paths=./api/...; \
		$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases; \
	else echo "generate: no API types with +kubebuilder:object:root yet"; fi
	@if grep -rlq '+kubebuilder:rbac' controlplane cmd 2>/dev/null; then \
		$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./controlplane/... $$([ -d cmd ] && echo paths=./cmd/...) output:rbac:artifacts:config=config/rbac; \
		$(CONTROLLER_GEN) webhook paths=./controlplane/... output:webhook:artifacts:config=config/webhook; \
	else echo "generate: no RBAC markers yet"; fi
