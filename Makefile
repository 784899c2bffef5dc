# Deckhand: a Kubernetes operator for SidecarSet, PodSet, WebServer and
# RestartSchedule. `make run` and `make test` are the two commands; see README.md.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

ROOT := $(shell pwd)
BIN := $(ROOT)/bin
K8S_BIN := $(BIN)/k8s
# OpenKruise's kruise-manager, built by hack/kruise for the benchmarks only.
KRUISE_BIN := $(BIN)/kruise
export DECKHAND_K8S_BIN := $(K8S_BIN)
export KUBEBUILDER_ASSETS := $(K8S_BIN)

CONTROLLER_TOOLS_VERSION ?= v0.23.0
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
# golangci-lint is pinned by hack/tools/go.mod and built from the module proxy.
GOLANGCI_LINT_VERSION := $(shell cd hack/tools && go list -m -f '{{.Version}}' github.com/golangci/golangci-lint/v2 2>/dev/null)
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
# crd-ref-docs (docs/api.md) is pinned by hack/crd-ref-docs/go.mod the same way.
CRD_REF_DOCS_VERSION := $(shell cd hack/crd-ref-docs && go list -m -f '{{.Version}}' github.com/elastic/crd-ref-docs 2>/dev/null)
CRD_REF_DOCS := $(BIN)/crd-ref-docs-$(CRD_REF_DOCS_VERSION)

IMG ?= ghcr.io/deckhand-dev/deckhand:dev
# The image config/manager/kustomization.yaml names (the default IMG).
BASE_IMG_NAME := ghcr.io/deckhand-dev/deckhand
CONTAINER_TOOL ?= docker
# kubectl (with its built-in kustomize) for the deployment targets; they act
# on the current kubeconfig ($$KUBECONFIG or ~/.kube/config).
KUBECTL ?= $(K8S_BIN)/kubectl
KUBECTL_DEP := $(if $(filter $(K8S_BIN)/kubectl,$(KUBECTL)),k8s-binaries,)
INSTALLER ?= dist/install.yaml
# The namespace build-installer renders the install for (empty: config/default's,
# deckhand-system). Set in config/default's one namespace line, which every
# namespace-dependent value of the install follows.
NAMESPACE ?=

# Whole-suite limit; a cold run is well under it.
TEST_TIMEOUT ?= 25m
GO_TEST_FLAGS ?=

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ The two commands

.PHONY: run
run: k8s-binaries metrics-binaries build ## Start a local control plane, install Deckhand, run it with the samples (Ctrl-C stops all).
	@go build -o $(BIN)/devcluster ./hack/devcluster
	@exec $(BIN)/devcluster --deckhand $(BIN)/deckhand --k8s-bin $(K8S_BIN) --dir $(ROOT)/.dev --samples $(ROOT)/config/samples

# `make test` runs ./... in one `go test`, the longest suites first
# (hack/test-packages.sh all), TEST_PARALLEL packages at a time: the suites
# that start a control plane mostly wait (on watches, leases, cron minutes
# and metric windows: the walkthrough, metrics-trigger and reliability
# suites used 15 to 20% of their wall time in CPU, all processes counted),
# so four run side by side on two cores. A long suite started last would
# run alone at the end. go test prints each package's result in the order
# it was given them.
TEST_PARALLEL ?= 4
.PHONY: test
test: k8s-binaries metrics-binaries build promcheck helm test-promcheck ## Run every test: unit, integration (apiserver+etcd) and end-to-end (full local cluster).
	@echo ">> hack/benchcharts, a module of its own (the benchmark charts; seconds)"; cd hack/benchcharts && go test -count=1 ./...
	@pkgs=$$(./hack/test-packages.sh all); \
	echo ">> running $$(echo $$pkgs | wc -w) test packages; the $$(./hack/test-packages.sh integration | wc -l) that start a control plane of their own take minutes each, the longest start first:"; \
	./hack/test-packages.sh integration | sed 's|^github.com/deckhand-dev/deckhand/|     |'; \
	echo ">> results print in this order (the first after several minutes):"; \
	echo "$$pkgs" | sed 's|^github.com/deckhand-dev/deckhand/|     |' | tr '\n' ' '; echo; \
	go test -count=1 -p $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) $$pkgs

# The quick loop: the packages with -short, where a suite that needs a
# control plane skips (testutil.SkipInShortMode) and localcluster.Start
# refuses to run (NoControlPlaneEnv), so a test that would start one fails
# here instead of slowing the loop down. The packages whose TestMain runs
# nothing in -short mode are left out (hack/test-packages.sh short): building
# their test binaries only to skip took a third of the loop's time.
.PHONY: test-unit
test-unit: k8s-binaries helm $(CONTROLLER_GEN) test-promcheck ## Run every test that needs no control plane (go test -short), under 2 minutes warm; kubectl (for its kustomize), helm and controller-gen are built first.
	@pkgs=$$(./hack/test-packages.sh short); \
	echo ">> running every test that needs no control plane: go test -short, $$(echo $$pkgs | wc -w) packages (those whose every test needs one are left out)"; \
	DECKHAND_NO_CONTROL_PLANE=1 go test -short -count=1 -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) $$pkgs

.PHONY: test-promcheck
test-promcheck: ## Run hack/promcheck's tests, a module of its own: the monitoring bundle's checks, each broken once (seconds).
	cd hack/promcheck && go test -count=1 ./...

.PHONY: promcheck
promcheck: ## Build bin/promcheck (hack/promcheck): Prometheus' own parsers, for the monitoring bundle's test.
	@echo ">> building promcheck (hack/promcheck)"
	@mkdir -p $(BIN); cd hack/promcheck && go build -o $(BIN)/promcheck .

##@ Benchmarks (never part of `make test`)

.PHONY: bench
bench: bench-clean-tree k8s-binaries build kruise ## Run every benchmark at full size: docs/benchmarks.md and its raw results in docs/bench-data/ (a clean tree only; see hack/bench).
	go run ./hack/bench --deckhand $(BIN)/deckhand --k8s-bin $(K8S_BIN) --kruise-bin $(KRUISE_BIN) --out $(ROOT)/docs/benchmarks.md || status=$$?; \
	$(MAKE) --no-print-directory bench-charts REPORT=$(ROOT)/docs/benchmarks.md; exit $${status:-0}

# The report in docs/ names the commit it measured, so it is refused on
# uncommitted changes before anything is built (hack/bench checks again,
# untracked Go sources included).
.PHONY: bench-clean-tree
bench-clean-tree:
	@git diff --quiet HEAD -- || { echo "make bench: the working tree has uncommitted changes; commit or stash them first (make bench-quick may run on a dirty tree and says so)" >&2; exit 1; }

.PHONY: bench-quick
bench-quick: k8s-binaries build ## Every benchmark at small sizes (a smoke run), report in bin/benchmarks-quick.md, raw results in bin/bench-data/; a dirty tree is allowed and marked.
	go run ./hack/bench --quick --deckhand $(BIN)/deckhand --k8s-bin $(K8S_BIN) --out $(BIN)/benchmarks-quick.md || status=$$?; \
	$(MAKE) --no-print-directory bench-charts REPORT=$(BIN)/benchmarks-quick.md; exit $${status:-0}

# A report whose items failed still has charts of those that ran: the
# charts are drawn whatever hack/bench's exit status, which is kept.
REPORT ?= $(ROOT)/docs/benchmarks.md
.PHONY: bench-charts
bench-charts: ## Draw the charts of a benchmark report (REPORT, default docs/benchmarks.md) from the raw results it names, into bench-data/charts beside it (hack/benchcharts, gonum.org/v1/plot).
	cd hack/benchcharts && go run . --report $(REPORT)

.PHONY: kruise
kruise: ## Build OpenKruise's kruise-manager and its CRDs into bin/kruise (once): the benchmarks' peer (docs/bench-kruise.md).
	@KRUISE_BIN_DIR=$(KRUISE_BIN) ./hack/kruise/build.sh

##@ Reliability (never part of `make test`; short versions of both run there)

# Time each fuzz target runs for in `make fuzz`.
FUZZTIME ?= 30s
FUZZ_REPORT ?= $(BIN)/fuzz-report.txt
STRESS_TIMEOUT ?= 120m
STRESS_REPORT ?= $(BIN)/reliability-figures.txt

.PHONY: fuzz
fuzz: ## Run every fuzz target in test/fuzz for FUZZTIME (default 30s) each; executions in bin/fuzz-report.txt.
	@mkdir -p $(BIN); : > $(FUZZ_REPORT)
	@for t in $$(go test -list '^Fuzz' ./test/fuzz/ | grep '^Fuzz'); do \
		echo "== $$t ($(FUZZTIME))"; \
		go test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) ./test/fuzz/ 2>&1 | tee $(BIN)/fuzz-$$t.log | grep -v '^fuzz: elapsed' || { tail -40 $(BIN)/fuzz-$$t.log; exit 1; }; \
		n=$$(grep -o 'execs: [0-9]*' $(BIN)/fuzz-$$t.log | tail -1); echo "$$t $${n:-execs: (run shorter than the 3s status interval)} in $(FUZZTIME)" >> $(FUZZ_REPORT); \
	done
	@cat $(FUZZ_REPORT)

.PHONY: stress
stress: k8s-binaries build ## Long fault tests: 300-pod PodSet, >= 20 SIGKILLs per scenario, failovers, planned stop, rolling upgrade (about 37 minutes); figures in bin/reliability-figures.txt.
	@mkdir -p $(dir $(STRESS_REPORT)); { echo "# make stress: source $$(git describe --always --dirty --abbrev=12), started $$(date -u +%Y-%m-%dT%H:%M:%SZ)"; \
		echo "# machine: $$(nproc) CPUs, $$(go env GOOS)/$$(go env GOARCH), load average at start $$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"; } > $(STRESS_REPORT)
	rc=0; DECKHAND_STRESS=1 DECKHAND_RELIABILITY_REPORT=$(STRESS_REPORT) go test -count=1 -v -timeout $(STRESS_TIMEOUT) ./test/reliability/ 2>&1 | tee $(STRESS_REPORT).log | grep -E '^(=== RUN|--- |    |PASS|FAIL|ok)' || rc=$$?; \
		{ echo "# results:"; grep -E '^(--- (PASS|FAIL|SKIP)|ok|FAIL)' $(STRESS_REPORT).log | sed 's/^/# /'; \
		echo "# ended $$(date -u +%Y-%m-%dT%H:%M:%SZ), load average at end $$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"; } >> $(STRESS_REPORT); rm -f $(STRESS_REPORT).log; exit $$rc
	@cat $(STRESS_REPORT)

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs, RBAC and webhook manifests from the markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd:generateEmbeddedObjectMeta=true webhook paths="./..." output:crd:artifacts:config=config/crd/bases
	@# Kubernetes' own descriptions (pod template, containers, probes) go, so
	@# that every CRD fits client-side apply's last-applied annotation.
	@go run ./hack/crdtrim config/crd/bases
	@# A mode's or a kind's permissions (markers with their own roleName) go
	@# to the component that turns it on, so the install grants them only then.
	@go run ./hack/rbacsplit config/rbac/role.yaml \
		manager-certs-role=config/components/self-managed-certs/role.yaml \
		manager-policy-role=config/components/policy-injection/role.yaml \
		manager-sidecarset-role=config/components/sidecarset-controller/role.yaml \
		manager-podset-role=config/components/podset-controller/role.yaml \
		manager-webserver-role=config/components/webserver-controller/role.yaml \
		manager-restartschedule-role=config/components/restartschedule-controller/role.yaml
	@$(MAKE) --no-print-directory chart-sync

# The chart's copies of config/: its CRDs (templates/crds.yaml renders them,
# so that helm upgrade upgrades them), the generated manager roles (the
# modes' roles of config/components too) and webhook configurations, the
# admission policy on the manager, the user roles and the monitoring bundle, which its
# templates read with .Files.Get. Copies, never edited by hand, so the chart
# cannot drift from config/ (test/helm checks both).
CHART := charts/deckhand
CHART_RBAC_FILES := role.yaml apps_editor_role.yaml apps_viewer_role.yaml sidecarset_admin_role.yaml sidecarset_viewer_role.yaml secret_reader_role.yaml
CHART_MONITORING_FILES := scraper.yaml servicemonitor.yaml prometheusrule.yaml grafana-dashboard.json

.PHONY: chart-sync
chart-sync: ## Copy the CRDs, generated roles and webhooks, user roles and monitoring bundle from config/ into charts/deckhand; write its README's table of values.
	@rm -rf $(CHART)/crds $(CHART)/files
	@mkdir -p $(CHART)/files/crds $(CHART)/files/rbac $(CHART)/files/webhook $(CHART)/files/monitoring
	@cp config/crd/bases/*.yaml $(CHART)/files/crds/
	@cp $(addprefix config/rbac/,$(CHART_RBAC_FILES)) $(CHART)/files/rbac/
	@for c in self-managed-certs policy-injection sidecarset-controller podset-controller webserver-controller restartschedule-controller; do mkdir -p $(CHART)/files/components/$$c; cp config/components/$$c/role.yaml $(CHART)/files/components/$$c/; done
	@mkdir -p $(CHART)/files/admission-policy; cp config/admission-policy/admission_policy.yaml $(CHART)/files/admission-policy/
	@cp config/webhook/manifests.yaml $(CHART)/files/webhook/
	@cp $(addprefix config/monitoring/,$(CHART_MONITORING_FILES)) $(CHART)/files/monitoring/
	@go run ./hack/chartreadme $(CHART)

.PHONY: helm
helm: ## Build bin/helm (hack/helm, from the Go module proxy) for the chart's tests.
	@echo ">> building helm (hack/helm)"
	@mkdir -p $(BIN); cd hack/helm && go build -o $(BIN)/helm helm.sh/helm/v4/cmd/helm

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./..."

# Where api-docs writes (test/layout writes elsewhere and compares).
API_DOCS ?= docs/api.md

.PHONY: api-docs
api-docs: $(CRD_REF_DOCS) ## Generate docs/api.md, the API reference, from the Go types in api/ (crd-ref-docs; config and templates in hack/crd-ref-docs).
	@$(CRD_REF_DOCS) --config hack/crd-ref-docs/config.yaml --source-path api/v1alpha1 --renderer markdown \
		--templates-dir hack/crd-ref-docs/templates --output-path $(API_DOCS) --log-level ERROR

.PHONY: fmt
fmt: ## gofmt the tree.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## go vet the tree.
	go vet ./...

.PHONY: duplicates
duplicates: ## List the places that repeat six or more lines, Go import blocks passed over (hack/duplicates.sh; needs the duplicates tool on PATH).
	@hack/duplicates.sh --most 200

.PHONY: verify
verify: k8s-binaries $(CONTROLLER_GEN) $(CRD_REF_DOCS) $(GOLANGCI_LINT) ## Regenerate code, manifests and docs/api.md and fail on drift; gofmt, go vet, module checks, golangci-lint.
	@$(MAKE) --no-print-directory manifests generate build-installer api-docs >/dev/null
	@drift=$$(git status --porcelain -- api config dist charts docs/api.md); if [ -n "$$drift" ]; then \
		echo "generated files differ from the committed ones (run make manifests generate build-installer api-docs and commit):"; echo "$$drift"; git --no-pager diff --stat -- api config dist charts docs/api.md; exit 1; fi
	@go mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	@$(MAKE) --no-print-directory lint
	$(GOLANGCI_LINT) run ./...

.PHONY: lint
lint: vet ## go vet, gofmt and module checks.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@if go list -deps ./... | grep -q '^k8s.io/kubernetes'; then echo "the main module must not depend on k8s.io/kubernetes"; exit 1; fi

# VERSION is the release version stamped into the binary (make release sets
# it); REVISION the commit, with -dirty for uncommitted changes.
VERSION ?= dev
REVISION ?= $(shell git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
VERSION_PKG := github.com/deckhand-dev/deckhand/internal/version
LDFLAGS := -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Revision=$(REVISION)

.PHONY: build
build: ## Build the manager binary into bin/deckhand (version stamped: bin/deckhand --version).
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/deckhand ./cmd/deckhand

.PHONY: plugin
plugin: ## Build the kubectl plugin into bin/kubectl-deckhand (version stamped: kubectl deckhand version); see docs/kubectl-plugin.md.
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-deckhand ./cmd/kubectl-deckhand

.PHONY: docker-build
docker-build: ## Build the manager image $(IMG) (multi-stage, static binary, distroless nonroot).
	$(CONTAINER_TOOL) build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMG) .

# Platforms of the multi-arch image; the Dockerfile's builder cross-compiles
# on the build machine's platform for each of them.
PLATFORMS ?= linux/amd64,linux/arm64

.PHONY: docker-buildx
docker-buildx: ## Build and push the multi-arch manager image $(IMG) for $(PLATFORMS) with docker buildx.
	- $(CONTAINER_TOOL) buildx create --name deckhand-builder
	$(CONTAINER_TOOL) buildx use deckhand-builder
	$(CONTAINER_TOOL) buildx build --push --platform=$(PLATFORMS) --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) --tag $(IMG) .
	- $(CONTAINER_TOOL) buildx rm deckhand-builder

.PHONY: docker-push
docker-push: ## Push the manager image $(IMG).
	$(CONTAINER_TOOL) push $(IMG)

##@ Release

# Where `make release` writes, and the platforms of the kubectl plugin.
RELEASE_DIR ?= dist/$(VERSION)
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64

.PHONY: release
release: $(KUBECTL_DEP) helm ## Write the release artefacts of VERSION=vX.Y.Z into dist/vX.Y.Z/: install.yaml pinned to the image tag, the Helm chart, the kubectl plugin per platform, the krew manifest, SHA256SUMS.
	@VERSION='$(VERSION)' OUT='$(abspath $(RELEASE_DIR))' IMG_NAME='$(BASE_IMG_NAME)' HELM='$(BIN)/helm' KUBECTL='$(KUBECTL)' \
		PLATFORMS='$(RELEASE_PLATFORMS)' REVISION='$(REVISION)' LDFLAGS_PKG='$(VERSION_PKG)' ./hack/release.sh

##@ Deployment (against the current kubeconfig)

.PHONY: build-installer
build-installer: $(KUBECTL_DEP) ## Render config/default with image $(IMG) (and namespace $(NAMESPACE) if set) into dist/install.yaml (one file: kubectl apply --server-side -f).
	@mkdir -p $(dir $(INSTALLER))
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	img='$(IMG)'; name="$${img%:*}"; tag="$${img##*:}"; \
	if [[ "$$img" != *:* || "$$tag" == */* ]]; then name="$$img"; tag=latest; fi; \
	base="$(ROOT)/config/default"; \
	if [ -n "$(NAMESPACE)" ]; then \
		cp -r "$(ROOT)/config" "$$tmp/config"; base="$$tmp/config/default"; \
		sed -i 's/^namespace: .*/namespace: $(NAMESPACE)/' "$$base/kustomization.yaml"; fi; \
	printf 'resources:\n- %s\nimages:\n- name: %s\n  newName: %s\n  newTag: %s\n' \
		"$$(realpath --relative-to="$$tmp" "$$base")" "$(BASE_IMG_NAME)" "$$name" "$$tag" > "$$tmp/kustomization.yaml"; \
	{ echo "# Deckhand: CRDs, RBAC, webhooks and the manager ($$name:$$tag)."; \
	  echo "# Generated by 'make build-installer' from config/default; do not edit."; \
	  echo "# Install: kubectl apply --server-side -f install.yaml"; \
	  $(KUBECTL) kustomize "$$tmp"; } > $(INSTALLER).tmp
	@mv $(INSTALLER).tmp $(INSTALLER)
	@echo "wrote $(INSTALLER) (image $(IMG))"

.PHONY: install
install: $(KUBECTL_DEP) ## Install the CRDs into the cluster.
	$(KUBECTL) kustomize config/crd | $(KUBECTL) apply --server-side -f -

.PHONY: uninstall
uninstall: $(KUBECTL_DEP) ## Remove the CRDs (and so every Deckhand object) from the cluster.
	$(KUBECTL) kustomize config/crd | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: deploy
deploy: $(KUBECTL_DEP) ## Deploy Deckhand (image $(IMG)) to the cluster: the same manifests as dist/install.yaml.
	@$(MAKE) --no-print-directory build-installer INSTALLER=$(ROOT)/.deploy.yaml.tmp IMG=$(IMG)
	$(KUBECTL) apply --server-side -f $(ROOT)/.deploy.yaml.tmp; rc=$$?; rm -f $(ROOT)/.deploy.yaml.tmp; exit $$rc

.PHONY: undeploy
undeploy: $(KUBECTL_DEP) ## Remove Deckhand from the cluster (CRDs and every Deckhand object included).
	$(KUBECTL) kustomize config/default | $(KUBECTL) delete --ignore-not-found --wait=false -f -

# Every tool `make verify` and `make test` need, built side by side: on a
# cold machine the module downloads and the single-threaded links of one
# build overlap the compiles of another. `.ci/run` starts with it; each
# target below still builds what it needs when run alone.
.PHONY: tools
tools: ## Build every tool make verify and make test use, side by side (control plane, metrics servers, golangci-lint, controller-gen, crd-ref-docs, helm, promcheck, the manager).
	@echo ">> building every tool make verify and make test use, four builds at a time"
	@$(MAKE) --no-print-directory -j4 k8s-binaries metrics-binaries $(CONTROLLER_GEN) $(CRD_REF_DOCS) $(GOLANGCI_LINT) helm promcheck build

.PHONY: k8s-binaries
k8s-binaries: ## Build kube-apiserver, controller-manager, scheduler, kubectl, etcd, kwok into bin/k8s (once).
	@./hack/k8s/build.sh

# The local cluster's metrics servers (localcluster Options.Metrics, `make
# run`), each built from its module under hack/ and rebuilt when its pins change.
.PHONY: metrics-binaries
metrics-binaries: $(K8S_BIN)/metrics-server $(K8S_BIN)/prometheus ## Build metrics-server and Prometheus into bin/k8s (once): the local cluster's resource and GPU-memory metrics.

$(K8S_BIN)/metrics-server: hack/metrics-server/go.mod hack/metrics-server/go.sum
	@mkdir -p $(K8S_BIN); echo ">> building metrics-server (hack/metrics-server)"
	cd hack/metrics-server && v=$$(go list -m -f '{{.Version}}' sigs.k8s.io/metrics-server) && \
		go build -trimpath -ldflags "-s -w -X k8s.io/client-go/pkg/version.gitVersion=$$v" -o $@ sigs.k8s.io/metrics-server/cmd/metrics-server

# remove_all_sd leaves Prometheus its file and HTTP service discovery only
# (kwok publishes its targets over HTTP): the cloud providers' SDKs are most
# of its build.
$(K8S_BIN)/prometheus: hack/prometheus/go.mod hack/prometheus/go.sum
	@mkdir -p $(K8S_BIN); echo ">> building prometheus (hack/prometheus, tag remove_all_sd)"
	cd hack/prometheus && v=$$(go list -m -f '{{.Version}}' github.com/prometheus/prometheus) && \
		go build -trimpath -tags remove_all_sd -ldflags "-s -w -X github.com/prometheus/common/version.Version=$$v" -o $@ github.com/prometheus/prometheus/cmd/prometheus

$(GOLANGCI_LINT):
	@mkdir -p $(BIN)
	cd hack/tools && go build -o $(GOLANGCI_LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint

$(CRD_REF_DOCS):
	@mkdir -p $(BIN)
	cd hack/crd-ref-docs && go build -o $(CRD_REF_DOCS) github.com/elastic/crd-ref-docs

$(CONTROLLER_GEN):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	@mv $(BIN)/controller-gen $(CONTROLLER_GEN)
