#!/usr/bin/env bash
# make test: everything CI checks, in the order a failure is cheapest to find.
set -euo pipefail
cd "$(dirname "$0")/.."
export KUBEBUILDER_ASSETS=$PWD/bin
export GOTOOLCHAIN=local
step() { printf '\n==> %s\n' "$*"; }

step "gofmt"
unformatted=$(gofmt -l $(git ls-files --cached --others --exclude-standard '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi

step "go vet"
go vet ./...
go vet -tags e2e ./test/e2e/

step "lint (golangci-lint with kube-api-linter; .golangci.yml)"
bin/golangci-lint run ./...

step "generated code, manifests and the Helm chart are current"
snapshot() { find api config charts -type f -print0 | sort -z | xargs -0 sha256sum; }
before=$(snapshot)
make --no-print-directory -s manifests generate chart
after=$(snapshot)
if [ "$before" != "$after" ]; then
  diff <(echo "$before") <(echo "$after") || true
  echo "generated files were stale: 'make manifests generate chart' changed them (now updated: commit them)"; exit 1
fi

step "helm lint --strict (charts/trellis, monitoring on and off)"
bin/helm lint --strict charts/trellis
# With config/prometheus and config/grafana, the chart has monitoring values.
if grep -q '^monitoring:' charts/trellis/values.yaml; then
  bin/helm lint --strict charts/trellis --set monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true
fi

step "alerts: promtool check and unit tests of the rules, a runbook for each (make test-alerts)"
make --no-print-directory -s test-alerts

step "unit and envtest suites"
go test -count=1 ./...

step "fuzz (short)"
for target in $(grep -rhoE '^func (Fuzz[A-Za-z0-9_]+)' --include='*_test.go' internal | sed 's/func //' | sort -u); do
  pkg=$(dirname "$(grep -rlE "^func $target\(" --include='*_test.go' internal | head -n1)")
  go test -run='^$' -fuzz="^${target}\$" -fuzztime="${FUZZTIME:-20000x}" "./$pkg"
done

step "bench smoke run (small sizes: proves make bench runs, not its figures)"
make --no-print-directory -s build
go test -run='^$' -bench=. -benchtime=1x ./internal/... >/dev/null
go run ./test/bench --smoke --out "$(mktemp -d)" 2>&1 | sed '/^\[/d'

step "images: unit tests of hack/images, and the same source gives the same digest"
(cd hack/images && go vet ./... && ../../bin/golangci-lint run ./... && go test -count=1 ./...)
make --no-print-directory -s images >/dev/null
again=$(mktemp -d)
make --no-print-directory -s images IMAGE_DIR="$again" >/dev/null
# Only what make images builds: bin/images may hold other archives (docs/storage.md imports one).
built=()
for tar in "$again"/*.tar; do
  built+=("bin/images/$(basename "$tar")")
  cmp "$tar" "bin/images/$(basename "$tar")" || { echo "bin/images/$(basename "$tar") differs when built again from the same source"; exit 1; }
done
rm -rf "$again"
sha256sum "${built[@]}"

step "release: built twice, the same bytes (images, install.yaml pinned by digest, checksums)"
make --no-print-directory -s release-check

step "end-to-end on a local KWOK cluster with a real node"
# The whole log goes to .dev/e2e.log; on a failure, each failed test's own
# lines are printed again last, below the managers' logs the suite dumps,
# so that the end of the output (all a CI page may keep) says what failed.
mkdir -p .dev
if ! go test -tags e2e -count=1 -timeout 50m -v ./test/e2e/ 2>&1 | tee .dev/e2e.log | grep -vE '^=== (RUN|PAUSE|CONT)'; then
  step "e2e: the failed tests again (the whole log: .dev/e2e.log)"
  awk '/^=== RUN/ {buf = ""} {buf = buf $0 "\n"} /^ *--- FAIL/ {printf "%s", buf; buf = ""}' .dev/e2e.log | tail -n 150
  exit 1
fi
