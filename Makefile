# Trellis — build, test and run the operator on a local KWOK cluster.
#
# Every tool the project needs is built from the Go module proxy into bin/ at a
# pinned version; a tool is rebuilt only when its pin below changes.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

# ---- pinned versions -------------------------------------------------------
# Kubernetes and etcd are pinned in their wrapper modules (hack/kube, hack/etcd).
KUBE_VERSION           := $(shell awk '$$1=="require" && $$2=="k8s.io/kubernetes" {print $$3}' hack/kube/go.mod)
# The oldest Kubernetes Trellis supports: its kube-apiserver runs the
# admission and attack suites too (make test; docs/operations.md).
KUBE_OLDEST_VERSION    := $(shell awk '$$1=="require" && $$2=="k8s.io/kubernetes" {print $$3}' hack/kube-oldest/go.mod)
ETCD_VERSION           := $(shell awk '$$1=="require" && $$2=="go.etcd.io/etcd/server/v3" {print $$3}' hack/etcd/go.mod)
# Flux's source-controller, for the tests of MarkdownView's spec.source;
# pinned in its wrapper module (hack/source-controller).
SOURCE_CONTROLLER_VERSION := $(shell awk '$$1=="require" && $$2=="github.com/fluxcd/source-controller" {print $$3}' hack/source-controller/go.mod)
# SeaweedFS (weed: its S3 gateway and IAM API), for the IAM account driver's
# tests and the storage suites' SeaweedFS column (make test builds it);
# pinned in its wrapper module (hack/seaweedfs), by pseudo-version: its Go
# module has no release tags.
SEAWEEDFS_VERSION      := $(shell awk '$$1=="require" && $$2=="github.com/seaweedfs/seaweedfs" {print $$3}' hack/seaweedfs/go.mod)
# The MinIO server, for the MinIO account driver's tests; pinned in its
# wrapper module (hack/minio), by pseudo-version: MinIO tags no Go module
# releases. MinIO is AGPL-3.0: it runs in tests only, is never shipped, and
# no Trellis binary links it (nor madmin-go, its admin client, also AGPL).
MINIO_VERSION          := $(shell awk '$$1=="require" && $$2=="github.com/minio/minio" {print $$3}' hack/minio/go.mod)
KWOK_VERSION           ?= v0.8.0
VERSITYGW_VERSION      ?= v1.8.0
CONTROLLER_GEN_VERSION ?= v0.23.0
KUSTOMIZE_VERSION      ?= v5.8.2
CONTAINERD_VERSION     ?= v2.3.7
HELM_VERSION           ?= v4.3.1
# The newest Helm 3, for the e2e tests of the README's install: users still
# run it. Built as bin/helm3 (bin/helm is Helm 4).
HELM3_VERSION          ?= v3.22.0
# golangci-lint v2 with kube-api-linter built in; kube-api-linter has no
# releases yet, so it is pinned by pseudo-version.
KUBE_API_LINTER_VERSION ?= v0.0.0-20260716143926-092fe0c72997
# promtool checks and unit-tests the alerting rules (make test-alerts);
# Prometheus 3.x is tagged v0.3xx.y in its Go module.
PROMTOOL_VERSION       ?= v0.316.0
# The SBOM of each release image, from the module graph (make release).
CYCLONEDX_GOMOD_VERSION ?= v1.10.0
# Signs the pushed images and checksums.txt (make release PUSH=… COSIGN_KEY=…).
COSIGN_VERSION         ?= v3.1.3
# Capsule, the peer make bench runs beside Trellis' Tenants. The module proxy
# does not serve it: its released source is kept, unchanged, in PEERS.
CAPSULE_VERSION        ?= v0.14.0
# kubernetes-controller-sharding's sharder, for the tests of Trellis as a
# shard (docs/scaling.md). The module proxy does not serve it either: its
# released source is kept, unchanged, in PEERS.
SHARDER_VERSION        ?= v0.13.0
PEERS                  ?= $(abspath $(CURDIR)/../shared/peers)

IMG        ?= trellis-manager:dev
VIEWER_IMG ?= trellis-viewer:dev
IMAGE_DIR  ?= $(CURDIR)/bin/images

export GOTOOLCHAIN := local
GO        ?= go
LOCALBIN  := $(CURDIR)/bin
export PATH := $(LOCALBIN):$(PATH)

# kube-ldflags VERSION: a Kubernetes binary that reports VERSION.
kube-ldflags = -s -w \
	-X k8s.io/component-base/version.gitVersion=$(1) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(1))) \
	-X k8s.io/component-base/version.gitTreeState=clean \
	-X k8s.io/client-go/pkg/version.gitVersion=$(1)
KUBE_LDFLAGS := $(call kube-ldflags,$(KUBE_VERSION))

KUBE_CMDS       := kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy
CONTAINERD_CMDS := containerd containerd-shim-runc-v2 ctr

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate CRDs and RBAC from the API types and markers.
	@mkdir -p .dev && tmp=$$(mktemp -d .dev/manifests.XXXXXX) && trap 'rm -rf "$$tmp"' EXIT && \
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./api/...;./internal/..." \
	  output:crd:artifacts:config=$$tmp/crd output:rbac:artifacts:config=$$tmp/rbac && \
	$(call move-changed,$$tmp/crd,config/crd/bases) && $(call move-changed,$$tmp/rbac,config/rbac)

# move-changed SRC,DEST: each file of SRC whose content DEST lacks, moved
# into DEST by rename. What a generator writes this way is never seen half
# written by a reader beside it (make test runs the e2e suite, whose
# `make deploy` generates, beside suites that read config/), and an
# unchanged file keeps its time.
define move-changed
for f in $(1)/*; do cmp -s "$$f" $(2)/"$${f##*/}" || mv "$$f" $(2)/ || exit 1; done
endef

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: chart
chart: manifests kustomize ## Write the Helm chart charts/trellis from config/ (committed; make test fails when it is stale).
	$(GO) run ./hack/chart generate -kustomize $(KUSTOMIZE) -config config -out charts/trellis

.PHONY: fmt
fmt: ## go fmt the code.
	$(GO) fmt ./...

.PHONY: vet
vet: ## go vet the code.
	$(GO) vet ./...

.PHONY: lint
lint: golangci-lint ## golangci-lint: kubebuilder's linters, and kube-api-linter on api/ (.golangci.yml).
	$(GOLANGCI_LINT) run ./...

.PHONY: build
build: ## Build the manager and viewer into bin/.
	$(GO) build -o $(LOCALBIN)/manager ./cmd/manager
	$(GO) build -o $(LOCALBIN)/viewer ./cmd/viewer

.PHONY: run
run: manifests generate ## Run the manager against the current kubeconfig.
	$(GO) run ./cmd/manager

.PHONY: dev
dev: tools node-packages images kustomize ## Local cluster with a real node, the manager deployed in it, S3 server, samples (Ctrl-C stops it).
	hack/dev.sh up

.PHONY: dev-local
dev-local: tools build ## Fast inner loop: local cluster (simulated nodes only), the manager as a local process, S3 server, samples.
	hack/dev.sh local

.PHONY: dev-down
dev-down: ## Stop and delete everything `make dev` or `make dev-local` started.
	hack/dev.sh down

##@ Test

.PHONY: test
test: ## The whole suite, every step timed: tools, checks, generated files, unit, envtest, fuzz, images, release, e2e.
	hack/test.sh

.PHONY: check-generated
check-generated: manifests generate chart ## Fail when generated files are not committed.
	@git diff --exit-code -- api config charts || { echo "generated files are stale: run 'make manifests generate chart' and commit" >&2; exit 1; }
	@test -z "$$(git status --porcelain -- api config charts)" || { git status --porcelain -- api config charts; echo "untracked generated files: commit them" >&2; exit 1; }

.PHONY: test-unit
test-unit: ## Unit and envtest suites only.
	KUBEBUILDER_ASSETS=$(LOCALBIN) $(GO) test ./api/... ./internal/... ./cmd/...

FUZZTIME ?= 10m
.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME (10m) each; make test runs them for seconds.
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

# The alerts (config/prometheus/prometheusrule.yaml) as promtool reads them:
# checked, every alert with a runbook in docs/operations.md, and unit-tested
# on series shaped like the manager's (config/prometheus/tests).
.PHONY: test-alerts
test-alerts: promtool ## Check the alerting rules and run their promtool unit tests.
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(GO) run ./hack/promrule rules -docs docs/operations.md config/prometheus/prometheusrule.yaml $$tmp/trellis.rules.yaml && \
	cp config/prometheus/tests/*.yaml $$tmp/ && \
	$(PROMTOOL) check rules $$tmp/trellis.rules.yaml && \
	$(PROMTOOL) test rules $$tmp/alerts_test.yaml

.PHONY: test-e2e
test-e2e: tools build images node-packages chromium ## End-to-end suite on a fresh local cluster with a real node.
	$(GO) test -tags e2e -count=1 -timeout 50m ./test/e2e/...

BENCH_ARGS ?=
VIEWER_BENCH_ARGS ?=
# MarkdownViews of each kind (small, maximal, worst) for the manager's memory per view.
MEMORY_BENCH_VIEWS ?= 80
# Namespaces of the Tenant whose copies make bench costs (1-64).
COPY_BENCH_NAMESPACES ?= 40
.PHONY: bench
bench: tools build capsule ## Micro-benchmarks, viewer latency on loopback, manager memory per MarkdownView, then scale benchmarks on a fresh local cluster beside Capsule (tens of minutes; BENCH_ARGS=--smoke for a quick run).
	$(GO) test -run='^$$' -bench=. -benchmem ./internal/...
	$(GO) run ./test/bench/viewerload --viewer $(LOCALBIN)/viewer $(VIEWER_BENCH_ARGS)
	TRELLIS_MEMORY_VIEWS=$(MEMORY_BENCH_VIEWS) KUBEBUILDER_ASSETS=$(LOCALBIN) $(GO) test -count=1 -timeout 30m -run='^TestManagerMemoryPerView$$' -v ./internal/controller/view/ | grep -E 'memory_test.go|^(ok|FAIL|---)'
	TRELLIS_COPY_NAMESPACES=$(COPY_BENCH_NAMESPACES) KUBEBUILDER_ASSETS=$(LOCALBIN) $(GO) test -count=1 -run='^TestCopyCost$$' -v ./internal/controller/tenancy/ | grep -E 'copies_cost_test.go|^(ok|FAIL|---)'
	$(GO) run ./test/bench --chart docs/performance-converge.svg $(BENCH_ARGS)

.PHONY: bench-scale
# Objects of each kind in make bench-scale.
SCALE_SIZE ?= 10000
bench-scale: tools build ## One-off scale run: SCALE_SIZE (10,000) MarkdownViews, Tenants and StorageBuckets (not part of make test). Its results join the chart of the next make bench.
	$(GO) run ./test/bench --scale --scale-size $(SCALE_SIZE) $(BENCH_ARGS)

.PHONY: bench-shards
# MarkdownViews of make bench-shards.
SHARD_VIEWS ?= 10000
bench-shards: tools build sharder ## One-off sharding run: SHARD_VIEWS (10,000) MarkdownViews on three shards of the real sharder, then on one manager and its standby (not part of make test; results in docs/performance-shards.json).
	$(GO) run ./test/bench --shards --shard-views $(SHARD_VIEWS) $(BENCH_ARGS)

##@ Deployment

.PHONY: install
install: manifests kustomize ## Install the CRDs into the current cluster.
	$(KUSTOMIZE) build config/crd | kubectl apply --server-side -f -

.PHONY: uninstall
uninstall: manifests kustomize ## Remove the CRDs (objects with finalizers keep their data; see docs/).
	$(KUSTOMIZE) build config/crd | kubectl delete --ignore-not-found -f -

# BUCKET_EVENTS=1: with the bucket-event receiver behind its leader-only
# Service (config/bucket-events; it needs the Secret trellis-bucket-events).
DEPLOY_CONFIG = config/$(if $(BUCKET_EVENTS),default-with-bucket-events,default)

.PHONY: deploy
deploy: manifests kustomize ## Deploy the manager image IMG (and viewer image VIEWER_IMG) into the current cluster; BUCKET_EVENTS=1 adds the bucket-event receiver.
	@mkdir -p .dev && tmp=$$(mktemp -d .dev/deploy.XXXXXX) && trap 'rm -rf "$$tmp"' EXIT && \
	cp config/manager/kustomization.yaml $$tmp/ && (cd $$tmp && $(KUSTOMIZE) edit set image controller=$(IMG)) && \
	$(call move-changed,$$tmp,config/manager)
	$(KUSTOMIZE) build $(DEPLOY_CONFIG) | sed 's|--viewer-image=.*|--viewer-image=$(VIEWER_IMG)|' | kubectl apply --server-side -f -

.PHONY: undeploy
undeploy: kustomize ## Remove the manager from the current cluster (BUCKET_EVENTS=1: its Service too).
	$(KUSTOMIZE) build $(DEPLOY_CONFIG) | kubectl delete --ignore-not-found -f -

# The images' binaries and labels name the release (a version, or what git
# describes) and the commit they were built from.
GIT_REVISION = $(shell git rev-parse HEAD 2>/dev/null)
GIT_VERSION  = $(shell git describe --tags --always --dirty 2>/dev/null)
VERSION_PKG := github.com/trellis-dev/trellis/internal/version

.PHONY: images
images: ## Build the manager and viewer images into bin/images/ (OCI archives, linux/amd64; no container engine).
	@mkdir -p $(IMAGE_DIR) $(LOCALBIN)/linux-amd64
	$(call build-binaries,$(LOCALBIN)/linux-amd64,$(GIT_VERSION),amd64)
	$(call build-image,manager,$(IMG),The Trellis operator,$(LOCALBIN),$(IMAGE_DIR),$(GIT_VERSION),linux/amd64)
	$(call build-image,viewer,$(VIEWER_IMG),Serves a MarkdownView as a website,$(LOCALBIN),$(IMAGE_DIR),$(GIT_VERSION),linux/amd64)
	cd hack/images && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags "-s -w" -o $(LOCALBIN)/linux-amd64/pause ./pause
	$(call build-image,pause,trellis-pause:dev,The real node's pod sandbox (make dev and e2e only),$(LOCALBIN),$(IMAGE_DIR),$(GIT_VERSION),linux/amd64)

# build-binaries DIR,VERSION,ARCH: the manager and viewer as static
# linux/ARCH binaries in DIR, stamped with VERSION and the commit
# (internal/version). The commit goes in by -X rather than Go's VCS stamp,
# which this build turns off: the stamp would also carry the commit's time
# and whether the tree is dirty, and whether it is there at all depends on
# the builder's GOFLAGS.
define build-binaries
CGO_ENABLED=0 GOOS=linux GOARCH=$(3) $(GO) build -trimpath -buildvcs=false \
  -ldflags "-s -w -X $(VERSION_PKG).Version=$(2) -X $(VERSION_PKG).Revision=$(GIT_REVISION)" \
  -o $(1)/ ./cmd/manager ./cmd/viewer
endef

# build-image NAME,REF,DESCRIPTION,BINROOT,OUTDIR,VERSION,PLATFORMS: the
# binaries BINROOT/OS-ARCH/NAME of PLATFORMS as image REF in
# OUTDIR/trellis-NAME.tar, one image index when there are several
# platforms; prints "OUTDIR/trellis-NAME.tar REF@DIGEST".
define build-image
cd hack/images && $(GO) run . image $(foreach p,$(7),-binary $(p)=$(4)/$(subst /,-,$(p))/$(1)) -entrypoint /$(1) -ref $(2) \
  -out $(5)/trellis-$(1).tar \
  -label org.opencontainers.image.title=trellis-$(1) -label "org.opencontainers.image.description=$(3)" \
  -label org.opencontainers.image.source=https://github.com/trellis-dev/trellis \
  -label org.opencontainers.image.revision=$(GIT_REVISION) -label org.opencontainers.image.version=$(6)
endef

.PHONY: docker-build
docker-build: ## Build the manager and viewer images (needs a container engine).
	docker build --target manager --build-arg REVISION=$(GIT_REVISION) --build-arg VERSION=$(GIT_VERSION) -t $(IMG) .
	docker build --target viewer --build-arg REVISION=$(GIT_REVISION) --build-arg VERSION=$(GIT_VERSION) -t $(VIEWER_IMG) .

##@ Release

# make release VERSION=vX.Y.Z writes dist/ (docs/operations.md): the images
# as OCI archives (an index of RELEASE_PLATFORMS each), their SBOMs
# (CycloneDX, from the module graph), images.txt (their references pinned by digest),
# install.yaml (config/default with the manager's image and --viewer-image
# pinned), the Helm chart trellis-X.Y.Z.tgz (images pinned in its values)
# and checksums.txt. The images are REGISTRY/trellis-manager and
# REGISTRY/trellis-viewer; PUSH=registry/prefix pushes them there, and
# REGISTRY defaults to it.
# With PUSH, COSIGN_KEY=path-or-KMS-URI (a file's password in
# COSIGN_PASSWORD) signs each pushed image by digest, its index and each
# platform's image, and checksums.txt, which covers every other file
# (checksums.txt.sigstore.json). COSIGN_SIGN_FLAGS keep cosign off the
# public Sigstore services (Rekor, and the TUF root that names them).
VERSION  ?=
PUSH     ?=
COSIGN_KEY ?=
COSIGN_SIGN_FLAGS ?= --use-signing-config=false --tlog-upload=false
REGISTRY ?= $(or $(PUSH),ghcr.io/trellis-dev)
DIST     ?= $(CURDIR)/dist
# A release is built from a commit: ALLOW_DIRTY=1 builds one from a modified
# tree anyway (its images name the commit, not the changes), for a try.
ALLOW_DIRTY ?=
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64
SEMVER_RE := ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$$

.PHONY: release
release: kustomize cyclonedx-gomod $(if $(COSIGN_KEY),cosign) ## Build release VERSION=vX.Y.Z into dist/: image archives, install.yaml (and install-without-mutating-policies.yaml, below 1.36) pinned by digest, the Helm chart, checksums (PUSH=registry/prefix pushes the images; COSIGN_KEY=… signs them and checksums.txt).
	@[[ "$(VERSION)" =~ $(SEMVER_RE) ]] || { echo "make release: VERSION=vX.Y.Z wanted, got '$(VERSION)'" >&2; exit 2; }
	@[[ -z "$(PUSH)" || "$(PUSH)" == "$(REGISTRY)" ]] || { echo "make release: PUSH=$(PUSH) but REGISTRY=$(REGISTRY): install.yaml would name images that are not pushed" >&2; exit 2; }
	@[[ -z "$(COSIGN_KEY)" || -n "$(PUSH)" ]] || { echo "make release: COSIGN_KEY without PUSH: the images' signatures go to the registry, beside them" >&2; exit 2; }
	@[[ -n "$(ALLOW_DIRTY)" || -z "$$(git status --porcelain)" ]] || { git status --short >&2; echo "make release: the tree has changes; commit them (or ALLOW_DIRTY=1 for a try)" >&2; exit 2; }
	rm -rf $(DIST) && mkdir -p $(DIST)/.bin
	for p in $(RELEASE_PLATFORMS); do $(call build-binaries,$(DIST)/.bin/$${p/\//-},$(VERSION),$${p#*/}) || exit 1; done
	@for b in manager viewer; do v=$$($(DIST)/.bin/linux-$$($(GO) env GOHOSTARCH)/$$b --version) && [[ "$$v" == "trellis-$$b $(VERSION) (revision $(GIT_REVISION), "* ]] || { echo "make release: $$b --version says '$$v'" >&2; exit 1; }; done
	$(call build-image,manager,$(REGISTRY)/trellis-manager:$(VERSION),The Trellis operator,$(DIST)/.bin,$(DIST),$(VERSION),$(RELEASE_PLATFORMS)) | sed 's|^$(DIST)/||' >> $(DIST)/images.txt
	$(call build-image,viewer,$(REGISTRY)/trellis-viewer:$(VERSION),Serves a MarkdownView as a website,$(DIST)/.bin,$(DIST),$(VERSION),$(RELEASE_PLATFORMS)) | sed 's|^$(DIST)/||' >> $(DIST)/images.txt
	pids=(); for b in manager viewer; do for p in $(RELEASE_PLATFORMS); do \
	  $(call sbom,$$b,$${p#*/},$(DIST)/trellis-$$b.$${p/\//-}.cdx.json) & pids+=($$!); done; done; \
	  for p in "$${pids[@]}"; do wait $$p || { echo "make release: an SBOM failed" >&2; exit 1; }; done
	$(GO) run ./hack/release install -kustomize $(KUSTOMIZE) -config config/default -images $(DIST)/images.txt -out $(DIST)/install.yaml
	$(GO) run ./hack/release install -kustomize $(KUSTOMIZE) -config config/default-without-mutating-policies -images $(DIST)/images.txt -out $(DIST)/install-without-mutating-policies.yaml
	$(GO) run ./hack/chart package -kustomize $(KUSTOMIZE) -config config -chart charts/trellis -version $(VERSION) -images $(DIST)/images.txt -out $(DIST) >/dev/null
	cd $(DIST) && LC_ALL=C sha256sum $$(LC_ALL=C ls) > checksums.txt.tmp && mv checksums.txt.tmp checksums.txt
	$(GO) run ./hack/release verify -platforms "$(RELEASE_PLATFORMS)" -binaries $(DIST)/.bin $(DIST)
	rm -rf $(DIST)/.bin
	@cat $(DIST)/images.txt
ifneq ($(PUSH),)
	cd hack/images && $(GO) run . push -archive $(DIST)/trellis-manager.tar -ref $(PUSH)/trellis-manager:$(VERSION)
	cd hack/images && $(GO) run . push -archive $(DIST)/trellis-viewer.tar -ref $(PUSH)/trellis-viewer:$(VERSION)
endif
ifneq ($(COSIGN_KEY),)
	for ref in $$(awk '{print $$2}' $(DIST)/images.txt | sed -E 's/:[^:/@]+@/@/'); do \
	  $(COSIGN) sign --yes --recursive $(COSIGN_SIGN_FLAGS) --key "$(COSIGN_KEY)" $$ref || exit 1; done
	$(COSIGN) sign-blob --yes $(COSIGN_SIGN_FLAGS) --key "$(COSIGN_KEY)" --bundle $(DIST)/checksums.txt.sigstore.json $(DIST)/checksums.txt
else
	@echo "make release: not signed (no COSIGN_KEY)"
endif

# sbom NAME,ARCH,OUT: the CycloneDX SBOM of the release's linux/ARCH binary
# cmd/NAME (every module it links, with its version, checksum and license;
# the binary's own hashes; the release's version), by cyclonedx-gomod from
# the module list Go records in the binary. Read from the binary, not the
# checkout, it needs no git (its source mode cannot read a git worktree); with
# GOPROXY=off and GOSUMDB=off it reads licenses from the module cache (its
# modules were checked against go.sum when downloaded) and asks no server. No
# serial number or time stamp, so the same commit gives the same bytes.
define sbom
GOOS=linux GOARCH=$(2) GOPROXY=off GOSUMDB=off $(CYCLONEDX_GOMOD) bin -json -licenses -noserial -notimestamp -version $(VERSION) \
  -output $(3) $(DIST)/.bin/linux-$(2)/$(1) 2>$(DIST)/.bin/sbom-$(1)-$(2).log || { cat $(DIST)/.bin/sbom-$(1)-$(2).log >&2; exit 1; }
endef

# What release-check builds: any version will do, the check is that two
# builds of it are the same.
CHECK_VERSION ?= v0.0.0-check

.PHONY: release-check
release-check: kustomize cyclonedx-gomod ## The same commit gives the same release: build CHECK_VERSION twice into temporary directories and compare them byte for byte.
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	for d in a b; do $(MAKE) --no-print-directory -s release VERSION=$(CHECK_VERSION) PUSH= COSIGN_KEY= ALLOW_DIRTY=1 DIST=$$tmp/$$d >/dev/null || exit 1; done && \
	diff -r $$tmp/a $$tmp/b && \
	echo "two builds of $(CHECK_VERSION) are byte-identical:" && cat $$tmp/a/images.txt $$tmp/a/checksums.txt

##@ Tools (pinned, built once into bin/)

CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
KUSTOMIZE      ?= $(LOCALBIN)/kustomize
GOLANGCI_LINT  ?= $(LOCALBIN)/golangci-lint
HELM           ?= $(LOCALBIN)/helm
HELM3          ?= $(LOCALBIN)/helm3
PROMTOOL       ?= $(LOCALBIN)/promtool
CYCLONEDX_GOMOD ?= $(LOCALBIN)/cyclonedx-gomod
COSIGN         ?= $(LOCALBIN)/cosign

.PHONY: tools
tools: tools-download kube etcd seaweedfs kwok versitygw controller-gen kustomize golangci-lint helm helm3 promtool containerd cyclonedx-gomod cosign gateway-api-crds source-controller minio ## Build every pinned tool into bin/.

# The packages `go install`ed at their pins below (the Kubernetes and etcd
# wrapper modules download through their go.mod).
GO_INSTALL_TOOLS := sigs.k8s.io/kwok/cmd/kwok@$(KWOK_VERSION) \
	github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION) \
	sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION) \
	sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION) \
	sigs.k8s.io/kube-api-linter/cmd/golangci-lint-kube-api-linter@$(KUBE_API_LINTER_VERSION) \
	helm.sh/helm/v4/cmd/helm@$(HELM_VERSION) \
	helm.sh/helm/v3/cmd/helm@$(HELM3_VERSION) \
	github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION) \
	github.com/containerd/containerd/v2/cmd/containerd@$(CONTAINERD_VERSION) \
	github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_GOMOD_VERSION) \
	github.com/sigstore/cosign/v3/cmd/cosign@$(COSIGN_VERSION)

# tools-download fetches every module the tools and the project build from,
# all at once, before any compile: on a new machine the builds below would
# otherwise each wait for their own downloads, one tool after another.
# (`go install -n` loads the packages, downloading what they need, and
# compiles nothing; so does `go list -deps` for source-controller, whose
# go.mod names modules the proxy does not serve and its build never needs.) With the modules already here it takes seconds.
.PHONY: tools-download
tools-download:
	@pids=(); \
	( cd hack/kube && $(GO) mod download ) & pids+=($$!); \
	( cd hack/etcd && $(GO) mod download ) & pids+=($$!); \
	( cd hack/seaweedfs && $(GO) mod download ) & pids+=($$!); \
	( cd hack/kube-oldest && $(GO) mod download ) & pids+=($$!); \
	( cd hack/source-controller && $(GO) list -deps github.com/fluxcd/source-controller >/dev/null ) & pids+=($$!); \
	( cd hack/minio && $(GO) mod download ) & pids+=($$!); \
	$(GO) mod download & pids+=($$!); \
	( cd hack/images && $(GO) mod download ) & pids+=($$!); \
	for t in $(GO_INSTALL_TOOLS); do $(GO) install -n $$t >/dev/null 2>&1 & pids+=($$!); done; \
	failed=0; for p in "$${pids[@]}"; do wait $$p || failed=1; done; \
	[ $$failed = 0 ] || { echo "tools-download: a download failed; the builds below say which" >&2; }

.PHONY: kube etcd seaweedfs minio kwok versitygw controller-gen kustomize golangci-lint helm helm3 promtool containerd cyclonedx-gomod cosign
kube: $(foreach c,$(KUBE_CMDS),$(LOCALBIN)/$(c))
containerd: $(foreach c,$(CONTAINERD_CMDS),$(LOCALBIN)/$(c))
etcd: $(LOCALBIN)/etcd
seaweedfs: $(LOCALBIN)/weed ## SeaweedFS's weed (SEAWEEDFS_VERSION) into bin/, for the IAM driver's tests.
minio: $(LOCALBIN)/minio ## The MinIO server (MINIO_VERSION; AGPL, for the MinIO driver's tests only, never shipped) into bin/.
kwok: $(LOCALBIN)/kwok $(LOCALBIN)/kwokctl
versitygw: $(LOCALBIN)/versitygw
controller-gen: $(LOCALBIN)/controller-gen
kustomize: $(LOCALBIN)/kustomize
golangci-lint: $(LOCALBIN)/golangci-lint
helm: $(LOCALBIN)/helm
helm3: $(LOCALBIN)/helm3
promtool: $(LOCALBIN)/promtool
cyclonedx-gomod: $(LOCALBIN)/cyclonedx-gomod
cosign: $(LOCALBIN)/cosign

.PHONY: source-controller
source-controller: $(LOCALBIN)/source-controller $(LOCALBIN)/source-controller-crds ## Flux's source-controller (SOURCE_CONTROLLER_VERSION) and its CRDs into bin/, for spec.source's tests.

.PHONY: capsule
capsule: $(LOCALBIN)/capsule ## Build Capsule (CAPSULE_VERSION) from its released source in PEERS, for make bench.

.PHONY: sharder
sharder: $(LOCALBIN)/sharder $(LOCALBIN)/sharder-crds ## Build the sharder (SHARDER_VERSION) and keep its ControllerRing CRD, from its released source in PEERS, for the shard tests.

# make test builds the sharder where PEERS holds its source; elsewhere the
# ring test skips and says why.
.PHONY: sharder-if-peers
sharder-if-peers:
	@if [ -f $(PEERS)/kubernetes-controller-sharding-$(SHARDER_VERSION).tar.gz ]; then $(MAKE) --no-print-directory -s sharder; \
	else echo "no kubernetes-controller-sharding source in $(PEERS): TestRingOfShards and the bench smoke's shards scenario will skip"; fi

# The Kubernetes commands share one compile, so they are built together (a
# grouped target: any one missing builds them all, mostly from the build cache).
$(foreach c,$(KUBE_CMDS),$(LOCALBIN)/$(c)-$(KUBE_VERSION)) &:
	@mkdir -p $(LOCALBIN)/.build-kube
	cd hack/kube && $(GO) build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o $(LOCALBIN)/.build-kube/ $(foreach c,$(KUBE_CMDS),k8s.io/kubernetes/cmd/$(c))
	for c in $(KUBE_CMDS); do mv $(LOCALBIN)/.build-kube/$$c $(LOCALBIN)/$$c-$(KUBE_VERSION); done
	rmdir $(LOCALBIN)/.build-kube

# containerd for the real node: the daemon, its runc shim and ctr, one install.
$(foreach c,$(CONTAINERD_CMDS),$(LOCALBIN)/$(c)-$(CONTAINERD_VERSION)) &:
	@mkdir -p $(LOCALBIN)/.gobin-containerd
	GOBIN=$(LOCALBIN)/.gobin-containerd $(GO) install -trimpath \
	  -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$(CONTAINERD_VERSION)" \
	  $(foreach c,$(CONTAINERD_CMDS),github.com/containerd/containerd/v2/cmd/$(c)@$(CONTAINERD_VERSION))
	for c in $(CONTAINERD_CMDS); do mv $(LOCALBIN)/.gobin-containerd/$$c $(LOCALBIN)/$$c-$(CONTAINERD_VERSION); done
	rmdir $(LOCALBIN)/.gobin-containerd

# The oldest supported kube-apiserver, and beside it (bin/kube-oldest, a
# KUBEBUILDER_ASSETS directory) the etcd and Gateway API CRDs every envtest
# suite takes from its assets.
.PHONY: kube-oldest
kube-oldest: $(LOCALBIN)/kube-apiserver-$(KUBE_OLDEST_VERSION) $(LOCALBIN)/etcd $(LOCALBIN)/gateway-api-crds ## The oldest supported kube-apiserver (KUBE_OLDEST_VERSION) as envtest assets in bin/kube-oldest.
	@mkdir -p $(LOCALBIN)/kube-oldest
	@ln -sf ../kube-apiserver-$(KUBE_OLDEST_VERSION) $(LOCALBIN)/kube-oldest/kube-apiserver
	@ln -sf ../etcd $(LOCALBIN)/kube-oldest/etcd
	@ln -sfn ../gateway-api-crds $(LOCALBIN)/kube-oldest/gateway-api-crds
$(LOCALBIN)/kube-apiserver-$(KUBE_OLDEST_VERSION):
	cd hack/kube-oldest && $(GO) build -trimpath -ldflags "$(call kube-ldflags,$(KUBE_OLDEST_VERSION))" -o $@ k8s.io/kubernetes/cmd/kube-apiserver

# source-controller and its CRDs, both from the module its wrapper pins.
$(LOCALBIN)/source-controller-$(SOURCE_CONTROLLER_VERSION):
	cd hack/source-controller && $(GO) build -trimpath -ldflags "-s -w" -o $@ github.com/fluxcd/source-controller
$(LOCALBIN)/source-controller-crds-$(SOURCE_CONTROLLER_VERSION):
	rm -rf $@.tmp && mkdir -p $@.tmp
	cp "$$(cd hack/source-controller && $(GO) list -m -f '{{.Dir}}' github.com/fluxcd/source-controller)"/config/crd/bases/*.yaml $@.tmp/
	chmod u+w $@.tmp/*.yaml
	mv $@.tmp $@
$(LOCALBIN)/source-controller-crds: $(LOCALBIN)/source-controller-crds-$(SOURCE_CONTROLLER_VERSION)
	ln -sfn source-controller-crds-$(SOURCE_CONTROLLER_VERSION) $@

$(LOCALBIN)/etcd-$(ETCD_VERSION):
	cd hack/etcd && $(GO) build -trimpath -ldflags "-s -w" -o $@ go.etcd.io/etcd/server/v3

# weed reports the commit of its pseudo-version (`weed version`).
$(LOCALBIN)/weed-$(SEAWEEDFS_VERSION):
	cd hack/seaweedfs && $(GO) build -trimpath \
	  -ldflags "-s -w -X github.com/seaweedfs/seaweedfs/weed/util/version.COMMIT=$(lastword $(subst -, ,$(SEAWEEDFS_VERSION)))" \
	  -o $@ github.com/seaweedfs/seaweedfs/weed

# minio reports the commit of its pseudo-version (`minio --version`); built
# as MinIO's own Makefile builds it (CGO off, the kqueue tag).
MINIO_COMMIT := $(lastword $(subst -, ,$(MINIO_VERSION)))
$(LOCALBIN)/minio-$(MINIO_VERSION):
	cd hack/minio && CGO_ENABLED=0 $(GO) build -trimpath -tags kqueue \
	  -ldflags "-s -w -X github.com/minio/minio/cmd.CommitID=$(MINIO_COMMIT) -X github.com/minio/minio/cmd.ShortCommitID=$(MINIO_COMMIT)" \
	  -o $@ github.com/minio/minio

# go-install-tool builds package $(2)@$(3) into bin/$(1)-$(3), with
# linker flags $(4) and build tags $(5).
define go-install-tool
@mkdir -p $(LOCALBIN)/.gobin-$(1)
GOBIN=$(LOCALBIN)/.gobin-$(1) $(GO) install -trimpath -tags "$(5)" -ldflags "-s -w $(4)" $(2)@$(3)
mv $(LOCALBIN)/.gobin-$(1)/* $(LOCALBIN)/$(1)-$(3)
rmdir $(LOCALBIN)/.gobin-$(1)
endef

$(LOCALBIN)/kwok-$(KWOK_VERSION):
	$(call go-install-tool,kwok,sigs.k8s.io/kwok/cmd/kwok,$(KWOK_VERSION),-X sigs.k8s.io/kwok/pkg/consts.Version=$(KWOK_VERSION))
$(LOCALBIN)/kwokctl-$(KWOK_VERSION):
	$(call go-install-tool,kwokctl,sigs.k8s.io/kwok/cmd/kwokctl,$(KWOK_VERSION),-X sigs.k8s.io/kwok/pkg/consts.Version=$(KWOK_VERSION))
$(LOCALBIN)/versitygw-$(VERSITYGW_VERSION):
	$(call go-install-tool,versitygw,github.com/versity/versitygw/cmd/versitygw,$(VERSITYGW_VERSION))
$(LOCALBIN)/controller-gen-$(CONTROLLER_GEN_VERSION):
	$(call go-install-tool,controller-gen,sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_GEN_VERSION))
$(LOCALBIN)/kustomize-$(KUSTOMIZE_VERSION):
	$(call go-install-tool,kustomize,sigs.k8s.io/kustomize/kustomize/v5,$(KUSTOMIZE_VERSION))
$(LOCALBIN)/golangci-lint-$(KUBE_API_LINTER_VERSION):
	$(call go-install-tool,golangci-lint,sigs.k8s.io/kube-api-linter/cmd/golangci-lint-kube-api-linter,$(KUBE_API_LINTER_VERSION))
$(LOCALBIN)/helm-$(HELM_VERSION):
	$(call go-install-tool,helm,helm.sh/helm/v4/cmd/helm,$(HELM_VERSION),-X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION) -X helm.sh/helm/v4/internal/version.gitTreeState=clean)
# Helm 3's command is named helm too: go-install-tool renames it helm3-VERSION.
$(LOCALBIN)/helm3-$(HELM3_VERSION):
	$(call go-install-tool,helm3,helm.sh/helm/v3/cmd/helm,$(HELM3_VERSION),-X helm.sh/helm/v3/internal/version.version=$(HELM3_VERSION) -X helm.sh/helm/v3/internal/version.gitTreeState=clean)
# Without service discovery (Prometheus' own build tag): promtool only
# checks and unit-tests rules here, and the cloud SDKs its discovery pulls
# in (EC2, OCI, Azure...) are a fifth of its packages.
$(LOCALBIN)/promtool-$(PROMTOOL_VERSION):
	$(call go-install-tool,promtool,github.com/prometheus/prometheus/cmd/promtool,$(PROMTOOL_VERSION),,remove_all_sd)
$(LOCALBIN)/cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION):
	$(call go-install-tool,cyclonedx-gomod,github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod,$(CYCLONEDX_GOMOD_VERSION))
$(LOCALBIN)/cosign-$(COSIGN_VERSION):
	$(call go-install-tool,cosign,github.com/sigstore/cosign/v3/cmd/cosign,$(COSIGN_VERSION),-X sigs.k8s.io/release-utils/version.gitVersion=$(COSIGN_VERSION) -X sigs.k8s.io/release-utils/version.gitTreeState=clean)

# Capsule's source, unpacked beside its binary; its CRDs are applied from there.
$(LOCALBIN)/capsule-$(CAPSULE_VERSION): $(PEERS)/capsule-$(CAPSULE_VERSION).tar.gz
	@mkdir -p $(LOCALBIN)/.src
	rm -rf $(LOCALBIN)/.src/capsule-$(CAPSULE_VERSION)
	tar -xzf $< -C $(LOCALBIN)/.src
	cd $(LOCALBIN)/.src/capsule-$(CAPSULE_VERSION) && $(GO) build -trimpath -ldflags "-s -w" -o $@ ./cmd/controller

# The sharder's source, unpacked beside its binary; its CRD (ControllerRing)
# and namespace are kept from there as the tests apply them. The sharder
# writes its own MutatingWebhookConfiguration for each ring.
SHARDER_SRC := $(LOCALBIN)/.src/kubernetes-controller-sharding-$(SHARDER_VERSION)
$(LOCALBIN)/sharder-$(SHARDER_VERSION): $(PEERS)/kubernetes-controller-sharding-$(SHARDER_VERSION).tar.gz
	@mkdir -p $(LOCALBIN)/.src
	rm -rf $(SHARDER_SRC)
	tar -xzf $< -C $(LOCALBIN)/.src
	cd $(SHARDER_SRC) && GOWORK=off $(GO) build -trimpath -ldflags "-s -w" -o $@ ./cmd/sharder
$(LOCALBIN)/sharder-crds-$(SHARDER_VERSION): $(LOCALBIN)/sharder-$(SHARDER_VERSION)
	rm -rf $@.tmp && mkdir -p $@.tmp
	cp $(SHARDER_SRC)/config/crds/namespace.yaml $(SHARDER_SRC)/config/crds/sharding.timebertt.dev_controllerrings.yaml $@.tmp/
	mv $@.tmp $@
$(LOCALBIN)/sharder-crds: $(LOCALBIN)/sharder-crds-$(SHARDER_VERSION)
	ln -sfn sharder-crds-$(SHARDER_VERSION) $@

# bin/<tool> is a link to the pinned build, so a changed pin rebuilds it.
define link-tool
$(LOCALBIN)/$(1): $(LOCALBIN)/$(1)-$(2)
	ln -sf $(1)-$(2) $$@
endef
$(foreach c,$(KUBE_CMDS),$(eval $(call link-tool,$(c),$(KUBE_VERSION))))
$(foreach c,$(CONTAINERD_CMDS),$(eval $(call link-tool,$(c),$(CONTAINERD_VERSION))))
$(eval $(call link-tool,etcd,$(ETCD_VERSION)))
$(eval $(call link-tool,weed,$(SEAWEEDFS_VERSION)))
$(eval $(call link-tool,minio,$(MINIO_VERSION)))
$(eval $(call link-tool,kwok,$(KWOK_VERSION)))
$(eval $(call link-tool,kwokctl,$(KWOK_VERSION)))
$(eval $(call link-tool,versitygw,$(VERSITYGW_VERSION)))
$(eval $(call link-tool,controller-gen,$(CONTROLLER_GEN_VERSION)))
$(eval $(call link-tool,kustomize,$(KUSTOMIZE_VERSION)))
$(eval $(call link-tool,golangci-lint,$(KUBE_API_LINTER_VERSION)))
$(eval $(call link-tool,helm,$(HELM_VERSION)))
$(eval $(call link-tool,helm3,$(HELM3_VERSION)))
$(eval $(call link-tool,promtool,$(PROMTOOL_VERSION)))
$(eval $(call link-tool,cyclonedx-gomod,$(CYCLONEDX_GOMOD_VERSION)))
$(eval $(call link-tool,cosign,$(COSIGN_VERSION)))
$(eval $(call link-tool,capsule,$(CAPSULE_VERSION)))
$(eval $(call link-tool,sharder,$(SHARDER_VERSION)))
$(eval $(call link-tool,source-controller,$(SOURCE_CONTROLLER_VERSION)))

# The Gateway API's standard-channel CRDs (HTTPRoute and friends), copied from
# the sigs.k8s.io/gateway-api module that go.mod pins (its module zip carries
# them), for `make dev` and the envtest suites (internal/testenv).
GATEWAY_API_VERSION := $(shell awk '$$1=="sigs.k8s.io/gateway-api" {print $$2}' go.mod)
.PHONY: gateway-api-crds
gateway-api-crds: $(LOCALBIN)/gateway-api-crds ## Gateway API CRDs from the pinned module into bin/gateway-api-crds.
$(LOCALBIN)/gateway-api-crds-$(GATEWAY_API_VERSION):
	$(GO) mod download sigs.k8s.io/gateway-api
	rm -rf $@.tmp && mkdir -p $@.tmp
	cp "$$($(GO) list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)"/config/crd/standard/*.yaml $@.tmp/
	chmod u+w $@.tmp/*.yaml
	mv $@.tmp $@
$(LOCALBIN)/gateway-api-crds: $(LOCALBIN)/gateway-api-crds-$(GATEWAY_API_VERSION)
	ln -sfn gateway-api-crds-$(GATEWAY_API_VERSION) $@

# Headless Chromium for the viewer's browser tests, from Debian's packages.
.PHONY: chromium
chromium:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# What the real node needs from Debian's packages: runc (containerd's runtime),
# the CNI plugins (bridge, host-local, portmap, loopback in /usr/lib/cni),
# iptables (the kubelet, kube-proxy and the bridge plugin's masquerading) and
# socat (the node's relay to the API server).
.PHONY: node-packages
node-packages:
	@{ command -v runc && test -x /usr/lib/cni/bridge && command -v iptables && command -v socat; } >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runc containernetworking-plugins iptables socat >/dev/null; }

.PHONY: clean
clean: ## Remove build output (keeps the pinned tools).
	rm -f $(LOCALBIN)/manager $(LOCALBIN)/viewer
	rm -rf $(LOCALBIN)/linux-amd64 $(IMAGE_DIR)
