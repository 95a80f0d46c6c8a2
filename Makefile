# lockguard. `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

# One build flavour for every Go build make runs: the control planes
# (hack/kube), the tools, lockguard, its image check and its tests all
# compile with CGO_ENABLED=0 and -trimpath, so that a package they share (the
# standard library, k8s.io/api, apimachinery, client-go...) is compiled once
# into the Go build cache rather than once per flavour (issue 26; hack/kube's
# v1.37 module selects lockguard's versions for the same reason).
# `make unit CGO_ENABLED=1 GO_TEST_FLAGS=-race` still works (a second
# flavour, compiled apart); binaries that ship or that tests start stay
# CGO_ENABLED=0 whatever it says.
# The flavour also compiles without DWARF and with one backend thread per
# compile (GO_GCFLAGS): nothing make builds keeps debug information (the
# binaries link with -s -w, test binaries without it), and the go command
# already compiles two packages at once on 2 cores, so the compiler's own
# concurrency (-c, 2 there by default) only adds work. lockguard's packages
# in an empty GOCACHE, on a quiet 2-core machine: 609 s of CPU with DWARF,
# 505-513 s without, 461 s without and with -c=1, whose wall time was
# shorter too (docs/history/test-times.md). Stack traces need neither. `make unit
# GO_GCFLAGS=` builds with DWARF, for a debugger.
GO_GCFLAGS ?= "-gcflags=all=-dwarf=false -c=1"
# hack/release/release.sh builds with these compiler flags and no others.
export GO_GCFLAGS
export CGO_ENABLED = 0
export GOFLAGS := $(strip $(filter-out -trimpath,$(GOFLAGS)) -trimpath $(GO_GCFLAGS))

# Kubernetes versions the tests run against. The first is the default.
KUBE_VERSIONS ?= 1.37.2 1.29.15
KUBE_VERSION ?= $(firstword $(KUBE_VERSIONS))
BIN := $(CURDIR)/bin
KUBE_ASSETS := $(BIN)/k8s
export LOCKGUARD_KUBE_ASSETS := $(KUBE_ASSETS)

CONTROLLER_GEN_VERSION := v0.23.0
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)

# helm, built from its Go module like the released binary (its default
# Capabilities.KubeVersion is the Kubernetes minor of its client-go). Not a
# dependency of lockguard's module: hack/tools requires it (the version is
# read from there), beside lockguard, so that the two share their
# dependencies' builds.
HELM_VERSION := $(shell awk '$$1 == "helm.sh/helm/v3" {print $$2}' hack/tools/go.mod)
HELM_KUBE_MINOR := 37
HELM := $(BIN)/helm-$(HELM_VERSION)
export LOCKGUARD_HELM := $(HELM)
# The chart is the one source of what ships: controller-gen writes the CRD
# and RBAC into it, the alerts and dashboard live in it, and
# deploy/lockguard.yaml is rendered from it.
CHART := deploy/chart/lockguard

# helm-docs writes the chart's README.md from values.yaml and its "# --"
# comments (make chart), built from its Go module like helm.
HELM_DOCS_VERSION := v1.14.2
HELM_DOCS := $(BIN)/helm-docs-$(HELM_DOCS_VERSION)

# The other tools the tests and the demo run, pinned and built from their Go
# modules like helm, so that a machine needs only Go, make and git: kubectl
# (hack/kube; one version for every control plane), Prometheus and promtool
# (the tests use the HTTP API, so no web UI assets; static and file service
# discovery only). Recipes find them by name in bin/path, first on make's
# PATH.
KUBECTL_VERSION := 1.37.2
KUBECTL := $(KUBE_ASSETS)/v$(KUBECTL_VERSION)/kubectl
PROMETHEUS_VERSION := v0.316.0
PROMETHEUS_RELEASE := 3.16.0
PROMETHEUS := $(BIN)/prometheus-$(PROMETHEUS_VERSION)
PROMTOOL := $(BIN)/promtool-$(PROMETHEUS_VERSION)
TOOLS_PATH := $(BIN)/path
export PATH := $(TOOLS_PATH):$(PATH)

# The release's tools, built from their Go modules like helm (not
# dependencies of lockguard's module): cyclonedx-gomod writes each binary's
# SBOM from the module versions the go command recorded in it, and krew
# installs the plugins from the release's manifests in make release-check.
CYCLONEDX_GOMOD_VERSION := v1.10.0
CYCLONEDX_GOMOD := $(BIN)/cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION)
KREW_VERSION := v0.4.3
KREW := $(BIN)/krew-$(KREW_VERSION)
# make release writes DIST; make release-check builds RELEASE_CHECK_VERSION
# twice under bin/release-check.
DIST ?= dist
RELEASE_CHECK_VERSION ?= v0.0.0-check
# The niceness of make release-compile (the release's platforms compiled
# into the Go build cache): make test's background lane sets 19, so that it
# runs on the CPU the suites leave idle.
RELEASE_COMPILE_NICE ?= 0

IMG ?= ghcr.io/navique/lockguard:dev
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GO_TEST_FLAGS ?=
# Every go test below runs after a go vet of the same packages (all of vet's
# analyzers), so it does not vet them again (-vet=off): go test's own vet is
# a second pass over every dependency, cached apart from go vet's, about as
# long as go vet's on a cold cache (issue 26). Every go vet of the main
# module uses the same build tags, VET_TAGS (every build tag of the tagged
# suites; no file excludes one), for the same reason: go vet caches the vet
# of each dependency per tag set.
VET_TAGS := e2e,chaos,release
# Timeouts of each package's go test in make e2e (the binary's suite, and
# the in-process suite on the other versions) and in make unit; the image
# `make e2e-kind` builds and loads into kind. They stop a hung test, not a
# slow one: the in-process suite (e2e/contract) takes 3 to 6 minutes beside
# make test's other lane, and took 10m28s once on a machine at load average
# 17 (a fresh-clone .ci/run on 7cf0588), past go test's default of 10m.
E2E_TIMEOUT ?= 20m
UNIT_TIMEOUT ?= 20m
E2E_IMG ?= ghcr.io/navique/lockguard:e2e
# The Kubernetes version of make e2e-kind's node image.
KIND_KUBE_VERSION ?= $(KUBE_VERSION)

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-14s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build bin/lockguard and the kubectl plugins bin/kubectl-lock and bin/kubectl-unlock.
	CGO_ENABLED=0 hack/with-progress.sh "bin/lockguard" go build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o $(BIN)/lockguard ./cmd/lockguard
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o $(BIN)/ ./cmd/kubectl-lock ./cmd/kubectl-unlock

KUBE_ETCD ?= 1
.PHONY: kube
kube: ## Build and cache etcd, kube-apiserver and kube-controller-manager for every KUBE_VERSIONS (KUBE_ETCD=0: not etcd).
	@for v in $(KUBE_VERSIONS); do KUBE_ETCD=$(KUBE_ETCD) hack/kube/build.sh $$v $(KUBE_ASSETS)/v$$v; done

$(KUBECTL):
	hack/kube/build.sh $(KUBECTL_VERSION) $(@D) kubectl

.PHONY: kubectl
kubectl: $(KUBECTL) ## Build the pinned kubectl (KUBECTL_VERSION) and put it in bin/path.
	@mkdir -p $(TOOLS_PATH) && ln -sfn $(KUBECTL) $(TOOLS_PATH)/kubectl

$(PROMETHEUS) $(PROMTOOL): $(BIN)/%-$(PROMETHEUS_VERSION):
	GOBIN=$(BIN)/tmp-$* CGO_ENABLED=0 hack/with-progress.sh "$* $(PROMETHEUS_RELEASE)" go install -trimpath -tags remove_all_sd \
	  -ldflags "-s -w -X github.com/prometheus/common/version.Version=$(PROMETHEUS_RELEASE)" github.com/prometheus/prometheus/cmd/$*@$(PROMETHEUS_VERSION)
	mv $(BIN)/tmp-$*/$* $@ && rmdir $(BIN)/tmp-$*

.PHONY: prometheus
prometheus: $(PROMETHEUS) $(PROMTOOL) ## Build the pinned prometheus and promtool and put them in bin/path.
	@mkdir -p $(TOOLS_PATH) && ln -sfn $(PROMETHEUS) $(TOOLS_PATH)/prometheus && ln -sfn $(PROMTOOL) $(TOOLS_PATH)/promtool

$(CONTROLLER_GEN):
	GOBIN=$(BIN)/tmp-controller-gen hack/with-progress.sh "controller-gen $(CONTROLLER_GEN_VERSION)" go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(BIN)/tmp-controller-gen/controller-gen $@ && rmdir $(BIN)/tmp-controller-gen

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Build the pinned controller-gen into bin/.

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD and RBAC into the chart ($(CHART)/crds, $(CHART)/files/rbac).
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=$(CHART)/crds
	$(CONTROLLER_GEN) rbac:roleName=lockguard paths=./... output:rbac:artifacts:config=$(CHART)/files/rbac

.PHONY: verify-generated
verify-generated: generate manifests chart ## Fail when generated files are stale.
	@if [ -n "$$(git status --porcelain -- api deploy)" ]; then \
	  echo "generated files are stale: run 'make generate manifests chart' and commit:"; git status --porcelain -- api deploy; git diff -- api deploy | head -50; exit 1; fi

# Every Go module of the repository: the main one and the separate ones (hack/...).
GO_MODULES := $(patsubst %/,%,$(dir $(shell git ls-files -- go.mod '*/go.mod' 2>/dev/null)))

.PHONY: tidy
tidy: ## go mod tidy every module (GO_MODULES).
	@for m in $(GO_MODULES); do echo "go mod tidy in $$m"; (cd $$m && go mod tidy); done

.PHONY: std
std: ## Compile the standard library packages lockguard's builds and tests import, with the flags every build here uses (make test's first step, while modules download).
	go build $$(go list -deps -test -tags $(VET_TAGS) -f '{{if .Standard}}{{.ImportPath}}{{end}}' ./... | sort -u)

.PHONY: verify-tidy
verify-tidy: ## Fail when a go.mod or go.sum of GO_MODULES is not tidy.
	@for m in $(GO_MODULES); do (cd $$m && go mod tidy -diff) || { echo "$$m: go.mod or go.sum is not tidy: run 'make tidy' and commit"; exit 1; }; done

.PHONY: lint
lint: ## gofmt and go vet (the tagged suites too: VET_TAGS).
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet -tags $(VET_TAGS) ./...

.PHONY: unit
# go test ./... starts two control planes: the in-process suite's
# (e2e/contract) and the harness's own test's (e2e/framework). The chart's
# tests that install it on a control plane, one per cached Kubernetes
# version for some (e2e/chart, build tag e2e), run next, with the rest of
# e2e/chart again (its renders, seconds).
unit: unit-packages chart-installs ## go test ./... (unit tests and the in-process suite, two control planes), then e2e/chart with its installs on every cached control plane (build tag e2e).

.PHONY: unit-packages
unit-packages: $(HELM) kubectl prometheus ## go test ./...: the unit tests and the in-process suite (two control planes of KUBE_VERSION).
	go vet -tags $(VET_TAGS) ./...
	LOCKGUARD_REQUIRE_KUBE=1 LOCKGUARD_REQUIRE_PROMETHEUS=1 go test -vet=off $(GO_TEST_FLAGS) -count=1 -timeout $(UNIT_TIMEOUT) ./...

.PHONY: chart-installs
chart-installs: $(HELM) kubectl prometheus ## e2e/chart with build tag e2e: the chart installed on every cached control plane.
	go vet -tags $(VET_TAGS) ./e2e/chart/
	LOCKGUARD_REQUIRE_KUBE=1 LOCKGUARD_REQUIRE_PROMETHEUS=1 go test -vet=off -tags e2e -timeout $(UNIT_TIMEOUT) $(GO_TEST_FLAGS) -count=1 ./e2e/chart/

.PHONY: monitoring
monitoring: monitoring-rules ## Check the chart's alert rules (promtool check/test rules) and dashboard JSON.
	go vet -tags $(VET_TAGS) ./e2e/chart/
	go test -vet=off -count=1 -run '^TestDashboardJSON$$' ./e2e/chart/

.PHONY: monitoring-rules
monitoring-rules: $(PROMTOOL) ## Check the chart's alert rules (promtool check rules, promtool test rules); make test's stage (its go test ./... checks the dashboard).
	$(PROMTOOL) check rules $(CHART)/files/monitoring/alerts.yaml
	cd $(CHART)/files/monitoring && $(PROMTOOL) test rules alerts_test.yaml

# E2E_FIRST_VERSION_ONLY names the tests that make e2e runs on KUBE_VERSION
# alone: they check lockguard's own code (its transport under hostile
# clients, the peer protocol's membership and its watch of its own
# webhook configuration) through APIs that do not differ between the
# versions, and take minutes each.
E2E_FIRST_VERSION_ONLY ?= ^(TestSlowBodies|TestForgedCRDReviews|Test14IdentityLeases|Test22CreateEntryWatched)$$

.PHONY: e2e
# The in-process suite (e2e/contract: the Lock contract, hostile clients,
# the kubectl plugin) runs on KUBE_VERSION in `make unit` (go test ./...);
# here it runs on the other KUBE_VERSIONS, next to the suite of the binary
# (e2e/, build tag e2e) on every one, but for E2E_FIRST_VERSION_ONLY, and
# the binary under hostile clients (e2e/hostile, build tag e2e) on every one.
# Test14PendingAcrossReplicas and its selector variant run with a user of
# the built-in edit role deleting the identity Leases the whole time
# (LOCKGUARD_E2E_LEASE_DELETER=edit; issue 36): a List and a refused
# Delete every 20 ms, in the noise of the run. Test14 took 91 s without it
# and 82 s with it on 1.37.2 (3,579 deletes refused), 79-92 s with it on
# 1.29.15 (4,113-4,134 refused, each one a call of the webhook there); the
# selector variant 210 s with it on 1.29.15 (6,021 refused); 2 cores at
# load average 17-36, 2026-12-03.
e2e: kube build $(HELM) kubectl prometheus ## The built binary against a local control plane, and the in-process suite, on every KUBE_VERSIONS (e2e/README.md).
	go vet -tags $(VET_TAGS) ./e2e/ ./e2e/hostile/ ./e2e/contract/
	@for v in $(KUBE_VERSIONS); do \
	  echo "e2e: Kubernetes $$v"; \
	  pkgs="./e2e/ ./e2e/hostile/"; skip='^$$'; if [ "$$v" != "$(KUBE_VERSION)" ]; then pkgs="./e2e/ ./e2e/hostile/ ./e2e/contract/"; skip='$(E2E_FIRST_VERSION_ONLY)'; fi; \
	  LOCKGUARD_KUBE_VERSION=$$v LOCKGUARD_REQUIRE_KUBE=1 LOCKGUARD_REQUIRE_PROMETHEUS=1 LOCKGUARD_E2E_REPORT=$(BIN)/e2e-report-$$v.txt \
	    LOCKGUARD_HOSTILE_REPORT=$(BIN)/hostile-report-$$v.txt LOCKGUARD_E2E_LEASE_DELETER=edit \
	    go test -vet=off -tags e2e -p 1 $(GO_TEST_FLAGS) -count=1 -timeout $(E2E_TIMEOUT) -skip "$$skip" $$pkgs; \
	  cat $(BIN)/e2e-report-$$v.txt $(BIN)/hostile-report-$$v.txt; \
	done

.PHONY: e2e-record
e2e-record: ## make e2e, then write its measurements, commit and load into e2e/README.md (commit the result).
	$(MAKE) e2e
	{ tree=$$(git rev-parse --short HEAD); [ -z "$$(git status --porcelain)" ] || tree="$$tree plus uncommitted changes"; \
	  echo "make e2e: PASS on commit $$tree, $$(date -u +%Y-%m-%dT%H:%MZ), $$(nproc) cores, load average at the end $$(cut -d' ' -f1-3 /proc/loadavg)"; \
	  for v in $(KUBE_VERSIONS); do echo; cat $(BIN)/e2e-report-$$v.txt; done; } > $(BIN)/e2e-record.txt
	hack/kind/record.sh $(BIN)/e2e-record.txt e2e/README.md e2e-record

.PHONY: e2e-kind
e2e-kind: $(HELM) ## The e2e suite in cluster mode on a kind cluster, every image built here, no registry (KIND_KUBE_VERSION, e2e/README.md).
	IMG=$(E2E_IMG) HELM=$(HELM) KIND_KUBE_VERSION=$(KIND_KUBE_VERSION) e2e/kind.sh

.PHONY: test
# hack/test.sh runs the stages (targets of this Makefile), the builds that
# later stages need in a background lane, and ends with a table of the
# stages' wall and CPU times (and which builds were cached), pass or fail.
# TEST_LANES=1: every stage in the foreground.
test: ## Everything CI runs, stage by stage; ends with a table of the stages' times (hack/test.sh).
	KUBE_VERSIONS="$(KUBE_VERSIONS)" KUBE_VERSION="$(KUBE_VERSION)" TEST_OUTPUTS_helm="$(HELM)" \
	  TEST_OUTPUTS_prometheus="$(PROMETHEUS) $(PROMTOOL)" TEST_OUTPUTS_codegen_tools="$(CONTROLLER_GEN) $(HELM_DOCS)" \
	  TEST_OUTPUTS_kubectl="$(KUBECTL)" MAKE="$(MAKE)" hack/test.sh

.PHONY: test-table
test-table: ## Print the stage table of the last make test again.
	@hack/test.sh table

# make test does not fuzz: go test ./... (make unit) runs every fuzz target
# on its seed corpus (the f.Add cases and testdata/fuzz), and make fuzz
# searches for new inputs, an instrumented build of every dependency and
# FUZZ_TIME per target (about 10 minutes cold on 2 cores; issue 26).
# Executions per target, not a duration: with a duration, go1.26's fuzz
# coordinator can fail a target with a bare 'context deadline exceeded' when
# the time runs out while a starved worker is mid-call (golang/go#75804, fixed
# in Go 1.27); a count has no deadline to race. FUZZ_TIME=10m still works.
FUZZ_TIME ?= 2000x

.PHONY: fuzz
fuzz: ## Fuzz the admission path, the review skimmer and the reconciler's kind decision, FUZZ_TIME (2000x: executions) per target (not in make test, whose unit stage replays the seed corpora).
	@set -e; for p in ./webhook/ ./internal/skim/ ./controller/; do \
	  for t in $$(go test -list '^Fuzz' $$p | grep '^Fuzz'); do \
	    echo "fuzz: $$p $$t for $(FUZZ_TIME)"; \
	    go test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZ_TIME) $$p; \
	  done; \
	done

CHAOS_DURATION ?= 3m

BENCH_SCALE ?= 1
BENCH_OUT ?= docs/benchmarks.md

.PHONY: bench
bench: kube build $(HELM) ## Performance benchmarks (issue 6; section 8: issue 13's admission modes and issue 12's namespace guard on every KUBE_VERSIONS), its duration in BENCH_OUT's header; BENCH_SCALE shrinks them; writes BENCH_OUT (docs/benchmarks.md).
	BENCH_SCALE=$(BENCH_SCALE) LOCKGUARD_KUBE_VERSION=$(KUBE_VERSION) go run ./hack/bench -lockguard $(BIN)/lockguard -out $(BENCH_OUT) \
	  -modes-versions "$(KUBE_VERSIONS)" -command-line "$(strip $(foreach v,BENCH_SCALE_POINTS BENCH_SCALE_NAMESPACES BENCH_SCALE_PROBES BENCH_SCALE_GOMEMLIMIT BENCH_SCALE_GODEBUG BENCH_SCALE_STACK_WATCH_CACHE BENCH_SCALE_WORST_LIMIT BENCH_SCALE_WORST_BASELINE BENCH_SCALE_WORST_EVERY,$(if $($(v)),$(v)=$($(v)))) make bench BENCH_SCALE=$(BENCH_SCALE))"

.PHONY: bench-scale
bench-scale: kube build ## make bench's scale section alone (issue 38: memory, start-up and DELETE decisions with many Locks and unlocked objects), into bin/benchmarks-scale.md and its plot; sized by BENCH_SCALE_POINTS, BENCH_SCALE_NAMESPACES, BENCH_SCALE_PROBES (defaults: a smoke run of about a minute); BENCH_SCALE_GOMEMLIMIT the GOMEMLIMIT lockguard runs with (default: the chart's, 90% of its memory limit; off: none), BENCH_SCALE_GODEBUG with that GODEBUG (gctrace=1: the start's collections in its log), BENCH_SCALE_STACK_WATCH_CACHE=off runs kube-apiserver without a watch cache of Stacks (what lets it hold a million here), BENCH_BASELINE=<an earlier lockguard binary> measures it side by side at each size; BENCH_SCALE_WORST_LIMIT the container memory limit of the worst case at the last size (default: the chart's; off: none), BENCH_SCALE_WORST_BASELINE=<an earlier lockguard binary> runs its worst case too, BENCH_SCALE_WORST_EVERY=1 at every size with Locks.
	LOCKGUARD_KUBE_VERSION=$(KUBE_VERSION) go run ./hack/bench -only scale -lockguard $(BIN)/lockguard -out $(BIN)/benchmarks-scale.md $(if $(BENCH_BASELINE),-baseline $(BENCH_BASELINE)) \
	  -command-line "make bench-scale BENCH_SCALE_POINTS=$${BENCH_SCALE_POINTS:-} BENCH_SCALE_NAMESPACES=$${BENCH_SCALE_NAMESPACES:-} BENCH_SCALE_PROBES=$${BENCH_SCALE_PROBES:-} BENCH_SCALE_GOMEMLIMIT=$${BENCH_SCALE_GOMEMLIMIT:-} BENCH_SCALE_GODEBUG=$${BENCH_SCALE_GODEBUG:-} BENCH_SCALE_STACK_WATCH_CACHE=$${BENCH_SCALE_STACK_WATCH_CACHE:-} BENCH_SCALE_WORST_LIMIT=$${BENCH_SCALE_WORST_LIMIT:-} BENCH_SCALE_WORST_BASELINE=$${BENCH_SCALE_WORST_BASELINE:-} BENCH_SCALE_WORST_EVERY=$${BENCH_SCALE_WORST_EVERY:-} BENCH_BASELINE=$(BENCH_BASELINE)"

.PHONY: bench-quick
bench-quick: ## make bench at BENCH_SCALE=0.1 (a few minutes), written to bin/benchmarks-quick.md.
	$(MAKE) bench BENCH_SCALE=0.1 BENCH_OUT=$(BIN)/benchmarks-quick.md

# The chaos runs (e2e/chaos, build tag chaos): both print their counts last.
CHAOS_ENV = LOCKGUARD_REQUIRE_KUBE=1 LOCKGUARD_KUBE_VERSION=$(KUBE_VERSION) LOCKGUARD_BINARY=$(BIN)/lockguard
# make chaos writes its counts into CHAOS_RECORD, between the markers of
# KUBE_VERSION (empty: nowhere).
CHAOS_RECORD ?= docs/reliability.md
# The short run that make test runs, on KUBE_VERSION.
CHAOS_SHORT_DURATION ?= 90s

.PHONY: chaos
chaos: kube build $(HELM) ## Chaos run: two replicas, faults and an invariant checker for CHAOS_DURATION (3m); counts last, and into CHAOS_RECORD (docs/reliability.md).
	go vet -tags $(VET_TAGS) ./e2e/chaos/
	rm -f $(BIN)/chaos-counts.txt
	rc=0; $(CHAOS_ENV) LOCKGUARD_CHAOS_DURATION=$(CHAOS_DURATION) LOCKGUARD_CHAOS_SUMMARY=$(BIN)/chaos-counts.txt \
	  LOCKGUARD_CHAOS_RECORD=$(if $(CHAOS_RECORD),$(abspath $(CHAOS_RECORD))) \
	  LOCKGUARD_CHAOS_COMMAND="make chaos KUBE_VERSION=$(KUBE_VERSION) CHAOS_DURATION=$(CHAOS_DURATION)" \
	  go test -vet=off -tags chaos $(GO_TEST_FLAGS) -count=1 -v -timeout 30m ./e2e/chaos/ 2>&1 | tee $(BIN)/chaos.log || rc=$$?; \
	  echo "chaos: full log in $(BIN)/chaos.log"; cat $(BIN)/chaos-counts.txt 2>/dev/null || echo "chaos: no counts: the run did not finish"; exit $$rc

.PHONY: chaos-short
chaos-short: kube build $(HELM) ## The short chaos run of make test: CHAOS_SHORT_DURATION (90s) of faults on KUBE_VERSION; counts last, written nowhere but bin/.
	go vet -tags $(VET_TAGS) ./e2e/chaos/
	rm -f $(BIN)/chaos-short-counts.txt
	rc=0; $(CHAOS_ENV) LOCKGUARD_CHAOS_DURATION=$(CHAOS_SHORT_DURATION) LOCKGUARD_CHAOS_SUMMARY=$(BIN)/chaos-short-counts.txt \
	  go test -vet=off -tags chaos $(GO_TEST_FLAGS) -count=1 -timeout 20m ./e2e/chaos/ || rc=$$?; \
	  cat $(BIN)/chaos-short-counts.txt 2>/dev/null || echo "chaos: no counts: the run did not finish"; exit $$rc

.PHONY: demo
demo: build $(HELM) kubectl ## Run lockguard for real against a local control plane of KUBE_VERSION only (Ctrl-C to stop).
	hack/kube/build.sh $(KUBE_VERSION) $(KUBE_ASSETS)/v$(KUBE_VERSION)
	CGO_ENABLED=0 hack/with-progress.sh "the demo (hack/demo)" go build -trimpath -o $(BIN)/demo ./hack/demo
	$(BIN)/demo --lockguard $(BIN)/lockguard

# The platforms the image is built for. make test checks amd64 only (a
# link: bin/lockguard's compiled packages are the same); arm64 is a
# compile of every dependency for another architecture (issue 26).
IMAGE_ARCHES ?= amd64 arm64

.PHONY: image-check
image-check: ## The Dockerfile's build stage without a container engine, on its build context, for IMAGE_ARCHES (amd64 arm64; make test: amd64) (hack/image/check.sh).
	hack/image/check.sh $(IMAGE_ARCHES)

.PHONY: docker-build
docker-build: ## Build the container image with docker, no registry needed (starts dockerd; GO_IMAGE from hack/image/go-image.sh).
	hack/kind/dockerd.sh
	docker build --build-arg GO_IMAGE=$$(hack/image/go-image.sh) --build-arg VERSION=$(VERSION) \
	  --build-arg GOPROXY=$$(go env GOPROXY) -t $(IMG) .
	hack/image/inspect.sh $(IMG)

.PHONY: clean
clean: ## Remove build output (keeps the cached control plane).
	rm -f $(BIN)/lockguard $(BIN)/kubectl-lock $(BIN)/kubectl-unlock $(BIN)/demo
	rm -rf $(BIN)/release $(BIN)/release-check $(DIST)

$(HELM):
	cd hack/tools && CGO_ENABLED=0 ../with-progress.sh "helm $(HELM_VERSION)" go build -trimpath -ldflags "-s -w \
	  -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	  -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_KUBE_MINOR) \
	  -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_KUBE_MINOR)" \
	  -o $@.tmp helm.sh/helm/v3/cmd/helm
	mv $@.tmp $@

.PHONY: helm
helm: $(HELM) ## Build the pinned helm into bin/.

$(HELM_DOCS):
	GOBIN=$(BIN)/tmp-helm-docs CGO_ENABLED=0 hack/with-progress.sh "helm-docs $(HELM_DOCS_VERSION)" go install -trimpath -ldflags "-s -w" \
	  github.com/norwoodj/helm-docs/cmd/helm-docs@$(HELM_DOCS_VERSION)
	mv $(BIN)/tmp-helm-docs/helm-docs $@ && rmdir $(BIN)/tmp-helm-docs

.PHONY: helm-docs
helm-docs: $(HELM_DOCS) ## Build the pinned helm-docs into bin/.

$(CYCLONEDX_GOMOD):
	GOBIN=$(BIN)/tmp-cyclonedx-gomod CGO_ENABLED=0 hack/with-progress.sh "cyclonedx-gomod $(CYCLONEDX_GOMOD_VERSION)" go install -trimpath -ldflags "-s -w" \
	  github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_GOMOD_VERSION)
	mv $(BIN)/tmp-cyclonedx-gomod/cyclonedx-gomod $@ && rmdir $(BIN)/tmp-cyclonedx-gomod

$(KREW):
	GOBIN=$(BIN)/tmp-krew CGO_ENABLED=0 hack/with-progress.sh "krew $(KREW_VERSION)" go install -trimpath \
	  -ldflags "-s -w -X sigs.k8s.io/krew/internal/version.gitTag=$(KREW_VERSION)" sigs.k8s.io/krew/cmd/krew@$(KREW_VERSION)
	mv $(BIN)/tmp-krew/krew $@ && rmdir $(BIN)/tmp-krew

# make release's VERSION: the one given (on the command line or in the
# environment), or none, for a dev release. VERSION's default above (git
# describe) is make build's, not a release's. The version is checked
# first (seconds), the tools built after (minutes on a new clone).
RELEASE_VERSION = $(if $(filter command environment override,$(origin VERSION)),$(VERSION))

.PHONY: release
release: ## Write a release into DIST (dist/): VERSION=vX.Y.Z (the chart's version), or with no VERSION a dev release vX.Y.Z-dev.gCOMMIT; archives, krew manifests, chart, images, SBOMs, SHA256SUMS, notes (hack/release/release.sh).
	hack/release/release.sh check "$(RELEASE_VERSION)"
	$(MAKE) --no-print-directory $(HELM) $(CYCLONEDX_GOMOD)
	HELM=$(HELM) CYCLONEDX_GOMOD=$(CYCLONEDX_GOMOD) hack/release/release.sh "$(RELEASE_VERSION)" $(DIST)

.PHONY: release-compile
release-compile: ## Compile the release's packages for every platform into the Go build cache, linking nothing (make test's background lane at nice 19), so make release and release-check only link.
	nice -n $(RELEASE_COMPILE_NICE) hack/release/release.sh compile

.PHONY: release-check
release-check: $(HELM) $(CYCLONEDX_GOMOD) $(KREW) kubectl ## Build the release RELEASE_CHECK_VERSION twice (byte-identical archives) and install it as users do: krew, helm install on a control plane (hack/release/check.sh).
	HELM=$(HELM) CYCLONEDX_GOMOD=$(CYCLONEDX_GOMOD) KREW=$(KREW) KUBECTL=$(KUBECTL) \
	  hack/release/check.sh $(RELEASE_CHECK_VERSION) $(BIN)/release-check

.PHONY: release-check-engine
release-check-engine: ## make release-check with a Docker engine (started if needed, root): docker load and run the image archive, containerd imports every archive as kind load image-archive does (not in CI: no engine there).
	hack/kind/dockerd.sh
	RELEASE_CHECK_ENGINE=1 $(MAKE) release-check

.PHONY: chart
chart: manifests $(HELM) $(HELM_DOCS) ## Render deploy/lockguard.yaml (the plain manifest) and the chart's README.md (helm-docs, from values.yaml) from the chart.
	hack/chart/render.sh $(HELM) $(CHART) > deploy/lockguard.yaml.tmp && mv deploy/lockguard.yaml.tmp deploy/lockguard.yaml
	$(HELM_DOCS) --chart-search-root $(CHART) --template-files README.md.gotmpl --sort-values-order file --skip-version-footer --log-level warning

.PHONY: helm-lint
helm-lint: $(HELM) ## helm lint --strict the chart in each mode.
	$(HELM) lint --strict $(CHART)
	$(HELM) lint --strict $(CHART) --set mode=both
	$(HELM) lint --strict $(CHART) --set lockGuard.enabled=false
	$(HELM) lint --strict $(CHART) --set certManager.enabled=false,webhook.tls.existingSecret=lockguard-tls,webhook.tls.caBundle=Y2E=
	$(HELM) lint --strict $(CHART) --set metrics.serviceMonitor.enabled=true,networkPolicy.enabled=true,networkPolicy.webhook.from[0].ipBlock.cidr=10.0.0.0/8

CERTMANAGER_GO = cd hack/certmanager && export GOFLAGS="$$GOFLAGS -mod=mod" && go

.PHONY: chart-e2e-build
chart-e2e-build: ## Vet and compile chart-e2e's module and test, running nothing (make test does it in a background lane).
	$(CERTMANAGER_GO) vet -tags $(VET_TAGS) ./... && go test -vet=off -count=1 -run '^$$' ./...

.PHONY: chart-e2e
# -mod=mod: the module replaces lockguard with this checkout, so its go.sum
# may lag behind a dependency just added to lockguard's go.mod. Its go vet
# uses VET_TAGS like every other: go vet caches the vet of a dependency per
# tag set, so the packages it shares with lockguard (most of them) are
# vetted already by lint, rather than vetted again (issue 26).
chart-e2e: kube $(HELM) ## The chart with cert-manager's real controllers and lockguard in-process (module hack/certmanager).
	$(CERTMANAGER_GO) vet -tags $(VET_TAGS) ./... && LOCKGUARD_REQUIRE_KUBE=1 go test -vet=off $(GO_TEST_FLAGS) -count=1 ./...

