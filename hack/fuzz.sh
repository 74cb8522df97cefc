#!/usr/bin/env bash
# Every fuzz target in internal/, one after another, each for FUZZTIME.
#   make test: a smoke of a few seconds each (hack/test.sh), which proves the
#              targets build and run, and finds only the shallowest crash;
#   make fuzz: the long runs, FUZZTIME=10m by default (a crash leaves its
#              input in the package's testdata/fuzz/, to commit as a test).
# A target's seed corpus runs in the unit step of make test anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:?FUZZTIME, e.g. 5s or 10m}
# FUZZ_FRESH=1 (make test): start from the seed corpus alone, not from every
# input earlier runs kept in the Go cache, which grows without bound and
# would eat a few seconds' budget before the first new input.
cache=()
if [ -n "${FUZZ_FRESH:-}" ]; then
  dir=$(mktemp -d) && trap 'rm -rf "$dir"' EXIT
  cache=("-test.fuzzcachedir=$dir")
fi
# deadline_race OUT: the only failure go test reports is the coordinator's
# own deadline, and no failing input was written.
deadline_race() {
  grep -q '^    context deadline exceeded$' <<<"$1" &&
    ! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' <<<"$1"
}
for file in $(grep -rlE '^func Fuzz[A-Za-z0-9_]+\(' --include='*_test.go' internal | sort); do
  for target in $(grep -oE '^func Fuzz[A-Za-z0-9_]+' "$file" | sed 's/^func //'); do
    started=$SECONDS
    # A bare "context deadline exceeded" with no failing input written is
    # Go's own coordinator racing its -fuzztime deadline (golang/go#75804),
    # not a finding: run that target once more. Any other failure, or the
    # race twice, fails.
    for attempt in 1 2; do
      if out=$(go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "./$(dirname "$file")" "${cache[@]}" 2>&1); then
        break
      fi
      if [ "$attempt" -eq 1 ] && deadline_race "$out"; then
        echo "$target: Go's fuzz deadline race (golang/go#75804), no input written; once more" >&2
        continue
      fi
      echo "$out"; exit 1
    done
    # The last progress line says how much was done: a target that made no
    # new executions in its time is a finding too (it idles).
    execs=$(echo "$out" | grep -oE 'execs: [0-9]+' | tail -n1 | grep -oE '[0-9]+' || echo 0)
    printf '%-32s %-28s %8s execs  %3ds\n' "$target" "$(dirname "$file")" "$execs" $((SECONDS - started))
    if [ "${execs:-0}" -eq 0 ]; then echo "$target ran no input in $fuzztime" >&2; exit 1; fi
  done
done
