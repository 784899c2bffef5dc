# Deckhand: a Kubernetes operator for SidecarSet, PodSet, WebServer and
# RestartSchedule. `make run` and `make test` are the two commands; see README.md.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

ROOT := $(shell pwd)
BIN := $(ROOT)/bin
K8S_BIN := $(BIN)/k8s
export DECKHAND_K8S_BIN := $(K8S_BIN)
export KUBEBUILDER_ASSETS := $(K8S_BIN)

CONTROLLER_TOOLS_VERSION ?= v0.23.0
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)

IMG ?= ghcr.io/deckhand-dev/deckhand:dev

# Whole-suite limit; a cold run is well under it.
TEST_TIMEOUT ?= 25m
GO_TEST_FLAGS ?=

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ The two commands

.PHONY: run
run: k8s-binaries build ## Start a local control plane, install Deckhand, run it with the samples (Ctrl-C stops all).
	@go build -o $(BIN)/devcluster ./hack/devcluster
	@exec $(BIN)/devcluster --deckhand $(BIN)/deckhand --k8s-bin $(K8S_BIN) --dir $(ROOT)/.dev --samples $(ROOT)/config/samples

.PHONY: test
test: k8s-binaries build ## Run every test: unit, integration (apiserver+etcd) and end-to-end (full local cluster).
	go test -count=1 -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) ./...

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs, RBAC and webhook manifests from the markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd:generateEmbeddedObjectMeta=true webhook paths="./..." output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./..."

.PHONY: fmt
fmt: ## gofmt the tree.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## go vet the tree.
	go vet ./...

.PHONY: lint
lint: vet ## go vet, gofmt and module checks.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@if go list -deps ./... | grep -q '^k8s.io/kubernetes'; then echo "the main module must not depend on k8s.io/kubernetes"; exit 1; fi

.PHONY: build
build: ## Build the manager binary into bin/deckhand.
	go build -o $(BIN)/deckhand ./cmd/deckhand

.PHONY: k8s-binaries
k8s-binaries: ## Build kube-apiserver, controller-manager, scheduler, kubectl, etcd, kwok into bin/k8s (once).
	@./hack/k8s/build.sh

$(CONTROLLER_GEN):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	@mv $(BIN)/controller-gen $(CONTROLLER_GEN)
