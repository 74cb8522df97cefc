#!/usr/bin/env bash
# make test: everything CI checks, in the order a failure is cheapest to find.
set -euo pipefail
cd "$(dirname "$0")/.."
export KUBEBUILDER_ASSETS=$PWD/bin
export GOTOOLCHAIN=local

# Every step is timed; the table is printed at the end, pass or fail, and
# kept in .dev/test-times.txt. The budget (README, under `make test`): 40 minutes on
# two idle cores with the Go caches warm (CI's case), 70 on a new machine,
# where the tools step builds bin/ first.
BUDGET_WARM_MIN=40
BUDGET_NEW_MIN=70
mkdir -p .dev
times_file=.dev/test-times.txt
step_names=() step_secs=() step_cpus=()
current="" started=$SECONDS step_started=$SECONDS step_cpu_started=0 new_machine=""
# read_cpu sets cpu_now to the CPU seconds (user + system) of every command
# this script has waited for so far, from bash's `times` (run here, not in a
# subshell, which would count its own children). Unlike wall time, it does
# not grow when something else shares the cores.
cpu_now=0
read_cpu() {
  times > "$times_file.cpu"
  cpu_now=$(children_cpu "$times_file.cpu")
}
# children_cpu prints the children's CPU seconds from the output of `times`.
children_cpu() {
  awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); n += p[1] * 60 + p[2] }; printf "%d", n }' "$1"
}
# The e2e suite runs in the background beside the later steps (below):
# wait_e2e waits for it and gives it a row of its own, its wall time from
# its start and its own CPU time, which the step that waited does not count.
e2e_pid="" e2e_started=0
wait_e2e() {
  [ -n "$e2e_pid" ] || return 0
  wait "$e2e_pid" || true
  e2e_pid=""
  local cpu
  cpu=$(children_cpu .dev/e2e.cpu)
  step_cpu_started=$((step_cpu_started + cpu))
  step_names+=("end-to-end suite, from its start (beside the steps after it)") step_secs+=($((SECONDS - e2e_started))) step_cpus+=("$cpu")
}
end_step() {
  [ -n "$current" ] || return 0
  read_cpu
  step_names+=("$current") step_secs+=($((SECONDS - step_started))) step_cpus+=($((cpu_now - step_cpu_started)))
  current=""
}
step() {
  end_step
  read_cpu
  current="$*" step_started=$SECONDS step_cpu_started=$cpu_now
  printf '\n==> %s\n' "$*"
}
report_times() {
  local rc=$? failed=""
  [ "$rc" = 0 ] || failed=$current
  if [ -n "$e2e_pid" ]; then
    # A step beside the e2e suite failed: the suite stops what it started
    # (its cluster, node and servers) only when it ends.
    printf '\n%s failed; waiting for the e2e suite beside it to finish (its log: .dev/e2e.log)\n' "$current"
    wait_e2e
    grep -E '^(--- FAIL|FAIL|ok)' .dev/e2e.log || true
  fi
  end_step
  read_cpu
  local total=$((SECONDS - started)) budget=$BUDGET_WARM_MIN i
  [ -z "$new_machine" ] || budget=$BUDGET_NEW_MIN
  {
    printf 'make test, %s, on %s cores\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(nproc)"
    printf '%8s %8s  %s\n' seconds cpu-secs 'step (the e2e suite runs beside the steps after its start: their seconds overlap)'
    for i in "${!step_names[@]}"; do
      printf '%8d %8d  %s%s\n' "${step_secs[$i]}" "${step_cpus[$i]}" "${step_names[$i]}" "$([ "${step_names[$i]}" = "$failed" ] && echo '   <- failed')"
    done
    printf '%8d %8d  total (%d min; budget %d min%s): %s\n' "$total" "$cpu_now" $(((total + 59) / 60)) "$budget" \
      "$([ -n "$new_machine" ] && echo ', a new machine: the tools were built' || echo ', the tools were built before')" \
      "$([ $((total)) -le $((budget * 60)) ] && echo within || echo OVER)"
    [ "$rc" = 0 ] || printf 'exit status %d\n' "$rc"
    # Inside the two longest steps: the packages and e2e tests over 20 s.
    if [ -f .dev/unit.log ] && [ .dev/unit.log -nt "$times_file.start" ]; then
      printf '\nunit and envtest packages over 20 s (they run two at a time):\n'
      awk '$1 == "ok" && $3 ~ /s$/ && $3+0 >= 20 {printf "%8.0f  %s\n", $3+0, $2}' .dev/unit.log | sort -rn
    fi
    if [ -f .dev/e2e.log ] && [ .dev/e2e.log -nt "$times_file.start" ]; then
      printf '\ne2e tests over 20 s (one at a time):\n'
      sed -nE 's/^--- (PASS|FAIL): ([^ ]+) \(([0-9.]+)s\)$/\3 \2 \1/p' .dev/e2e.log |
        awk '$1 >= 20 {printf "%8.0f  %s%s\n", $1, $2, ($3 == "FAIL" ? "   <- failed" : "")}' | sort -rn
    fi
  } | tee "$times_file"
}
trap report_times EXIT
touch "$times_file.start" # the logs newer than this are this run's

step "tools: every module downloaded at once, then every tool of make test built into bin/, three at a time"
# A new machine (no pinned Kubernetes in the Go module cache) downloads and
# compiles them here; then the budget is the new machine's. CI's fresh clone
# builds bin/ too, from the warm caches. Three builds at a time keep both
# cores busy: one go build alone leaves one idle while it links. The e2e
# suite's tools are built here because it starts early (below). The servers
# only the unit suites start (SeaweedFS, MinIO, source-controller: about
# 1,600 CPU-s on a new machine, 10 s each warm) are built beside lint, while
# the e2e suite leaves most of the cores idle, and so is the sharder
# (TestRingOfShards), only where PEERS holds its source (235 CPU-s the first
# time, 4 once built; elsewhere that test skips); the oldest kube-apiserver
# and cosign, by the steps that use them.
kube_version=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' hack/kube/go.mod)
[ -f "$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$kube_version.zip" ] || new_machine=1
make --no-print-directory -s tools-download
make --no-print-directory -s -j3 --output-sync=target kube etcd kwok versitygw controller-gen kustomize golangci-lint helm promtool \
  gateway-api-crds containerd helm3 cyclonedx-gomod

step "gofmt"
unformatted=$(gofmt -l $(git ls-files --cached --others --exclude-standard '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi

step "generated code, manifests and the Helm chart are current"
snapshot() { find api config charts -type f -print0 | sort -z | xargs -0 sha256sum; }
before=$(snapshot)
make --no-print-directory -s manifests generate chart
after=$(snapshot)
if [ "$before" != "$after" ]; then
  diff <(echo "$before") <(echo "$after") || true
  echo "generated files were stale: 'make manifests generate chart' changed them (now updated: commit them)"; exit 1
fi

step "helm lint --strict (charts/trellis: Helm 4 and 3, Kubernetes 1.33 and 1.37, monitoring on and off)"
bin/helm lint --strict charts/trellis
# Helm 3 lints as Kubernetes 1.20 unless told, and logs the chart's own
# guard (a template `fail`) as INFO with exit status 0: it is linted on the
# oldest and newest supported versions, and any such line fails the step.
for args in "--kube-version 1.33.0 --set admissionPolicies.mutating.enabled=false" "--kube-version 1.37.0"; do
  # shellcheck disable=SC2086 # args are words
  out=$(bin/helm3 lint --strict $args charts/trellis 2>&1) || { echo "$out"; exit 1; }
  if grep -q 'Fail:' <<<"$out"; then echo "helm3 lint $args:"; echo "$out"; exit 1; fi
done
# With config/prometheus and config/grafana, the chart has monitoring values.
if grep -q '^monitoring:' charts/trellis/values.yaml; then
  bin/helm lint --strict charts/trellis --set monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true
fi

step "alerts: promtool check and unit tests of the rules, a runbook for each (make test-alerts)"
make --no-print-directory -s test-alerts

step "fuzz smoke (every target for a few seconds; make fuzz runs them long)"
# Before the e2e suite starts: a target given seconds must have the cores.
FUZZTIME=${FUZZTIME:-3s} FUZZ_FRESH=1 hack/fuzz.sh

step "images: unit tests of hack/images, and the images e2e loads into its real node (make build images)"
(cd hack/images && ../../bin/golangci-lint run ./... && go test -count=1 ./...)
# That the same source gives the same bytes is the release step's check: a
# release is these images, built twice and compared.
make --no-print-directory -s build images >/dev/null
sha256sum bin/images/trellis-{manager,viewer,pause}.tar

step "end-to-end: the real node's Debian packages and Chromium, then the suite started beside the steps below"
# The e2e suite mostly waits (for pods, leases, rollouts: a third of a core
# on average), so it runs beside the steps below rather than after them.
# Those steps only read the tree, at lower priority than the suite's
# cluster; the suite's `make deploy` writes config/ only when a file
# changes, and by rename (Makefile: manifests, deploy). Its whole log goes
# to .dev/e2e.log and is printed at the end.
make --no-print-directory -s node-packages chromium
# The real node taints itself DiskPressure when under 1% of its disk is
# free (hack/node/kubelet.yaml), and a pod then stays Pending with no word
# why: say it now, not after the suite's timeouts.
free_gib=$(($(df --output=avail -k . | tail -n1) / 1024 / 1024))
if [ "$free_gib" -lt 10 ]; then
  echo "only $free_gib GiB free on $(df --output=target . | tail -n1): the e2e suite needs 10 (its node stops scheduling near a full disk)"; exit 1
fi
rm -f .dev/e2e.rc
e2e_started=$SECONDS
(
  set +e
  go test -tags e2e -count=1 -timeout 50m -v ./test/e2e/ > .dev/e2e.log 2>&1
  echo $? > .dev/e2e.rc
  times > .dev/e2e.cpu
) &
e2e_pid=$!

# Beside the e2e suite, niced below it.
niced() { nice -n 10 "$@"; }

# No separate go vet: golangci-lint's govet runs the same analyzers on the
# same files (tests and the e2e tag included), and a second pass cost two
# minutes on a new machine.
step "lint (golangci-lint with kube-api-linter and govet; .golangci.yml), the unit suites' servers built beside it"
niced make --no-print-directory -s -j2 --output-sync=target seaweedfs minio source-controller sharder-if-peers > .dev/servers.log 2>&1 &
servers_pid=$!
lint_rc=0
niced bin/golangci-lint run ./... || lint_rc=$?
servers_rc=0
wait "$servers_pid" || servers_rc=$?
cat .dev/servers.log
[ "$servers_rc" = 0 ] || { echo "building the unit suites' servers failed (above)"; exit 1; }
[ "$lint_rc" = 0 ] || exit "$lint_rc"

step "unit and envtest suites"
# 20 minutes a package, not go test's 10: beside the e2e suite the storage
# envtest (versitygw and SeaweedFS columns) takes six to seven.
niced go test -count=1 -timeout 20m ./... 2>&1 | tee .dev/unit.log
step "admission and attack suites on the oldest supported Kubernetes ($(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' hack/kube-oldest/go.mod))"
# The same envtest suites on an older kube-apiserver: the policies' CEL
# (its libraries differ by version), the controllers' own finalizers where
# MutatingAdmissionPolicies are not served, and the attacks. The rest of the
# suites ran on the pinned version above.
# Tenancy: every admission policy and the attacks on it; views: the
# confused-deputy policy; storage: buckets and keys made, deleted and
# refused with the finalizers the controllers add themselves.
oldest_tests=(
  TestAdmissionPolicyKeepsTenantAdminsFromLooseningGuardrails TestTenantsAreCreatedWithTheFinalizer
  TestTenantAttacks TestTenantAllowancesBindEveryoneInTheTenantsNamespaces TestTenantAllowancesOperationByOperation
  TestEveryPodFieldThatNamesAnImageIsRead TestTheManagersChildrenAreHeldToTheTenantsAllowances
  TestEveryPodFieldThatNamesAClassIsRead TestTenantClassAllowancesOperationByOperation
  TestTheViewersPodsAreHeldToTheTenantsPriorityClasses
  TestGuardrailsHoldAgainstOtherRoutes TestForgedTenantObjectsAreRefusedOutsideTenants
  TestIsolationVerdictAgreesWithTheAdmissionPolicy TestPodSecurityVerdictAgreesWithAdmission
  TestTenantAdminAddsNamespacesWithinBounds TestNamespaceRequestsPolicyByOperation
  TestNamespaceAdminCannotGiveUpAGrantedNamespace TestOwnerReferenceCannotGiveUpAGrantedNamespace
  TestConflictedGrantCannotBeGivenUpByANamespaceAdmin
  TestNoOneGetsThroughAMarkdownViewWhatTheyCouldNotCreate TestMarkdownViewRightsOperationByOperation
  TestAViewNamedAfterAForeignServiceGetsNoneOfItsClients
  TestBucketIsCreatedTaggedAndHealthy TestBucketAccessGrantsExactlyOneBucket TestStorageAdmission TestDeletionPolicies
  TestObjectStoreSpecNeedsRightsOnItsReferences
  TestCreationWritesAreTheDesignMinimum TestANewBucketCostsTwoStatusWritesAndOneEvent
)
niced make --no-print-directory -s kube-oldest
KUBEBUILDER_ASSETS=$PWD/bin/kube-oldest niced go test -count=1 -run "^($(IFS='|'; echo "${oldest_tests[*]}"))\$" \
  ./internal/controller/tenancy/ ./internal/controller/view/ ./internal/controller/storage/ 2>&1 | tee .dev/unit-oldest.log

step "bench smoke run (small sizes: proves make bench runs, not its figures)"
niced go test -run='^$' -bench=. -benchtime=1x ./internal/... >/dev/null
niced go run ./test/bench --smoke --out "$(mktemp -d)" 2>&1 | sed '/^\[/d'

step "release: built twice, the same bytes (amd64 and arm64 images, SBOMs, install.yaml pinned by digest, checksums)"
niced make --no-print-directory -s release-check

step "signed release: pushed to an in-process registry, signed and verified with cosign"
# make release PUSH=… COSIGN_KEY=… with a throwaway key, then what a user
# runs to verify it, and what must not verify (docs/operations.md).
niced make --no-print-directory -s cosign
(cd hack/images && SIGNED_RELEASE_COSIGN=$PWD/../../bin/cosign niced go test -count=1 -run '^TestSignedRelease$' .)

step "end-to-end: the rest of the suite, after the steps beside it"
wait_e2e
# On a failure, each failed test's own lines are printed again last, below
# the managers' logs the suite dumps, so that the end of the output (all a
# CI page may keep) says what failed.
grep -vE '^=== (RUN|PAUSE|CONT)' .dev/e2e.log
if [ "$(cat .dev/e2e.rc)" != 0 ]; then
  step "e2e: the failed tests again (the whole log: .dev/e2e.log)"
  awk '/^=== RUN/ {buf = ""} {buf = buf $0 "\n"} /^ *--- FAIL/ {printf "%s", buf; buf = ""}' .dev/e2e.log | tail -n 150
  exit 1
fi
