# etcd-adapter Makefile. `make help` lists the targets.
SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := help

GO ?= go
# Test binaries (kube-apiserver, etcd) are built from the Go module proxy into a cache outside
# the repository, keyed by version, and reused when present.
ASSETS_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/etcd-adapter/assets

.PHONY: help
help: ## List targets.
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-18s %s\n", $$1, $$2}'

.PHONY: envtest-assets
envtest-assets: ## Build kube-apiserver and etcd for the test environment into ASSETS_CACHE (once per version).
	@hack/build-assets.sh "$(ASSETS_CACHE)"

.PHONY: test
test: envtest-assets ## Run every test (unit, fuzz seeds, real-component suites).
	KUBEBUILDER_ASSETS="$$(hack/build-assets.sh "$(ASSETS_CACHE)")" $(GO) test ./... -count=1

.PHONY: lint
lint: ## gofmt, go vet.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
