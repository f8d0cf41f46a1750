#!/usr/bin/env bash
# Runs every Go fuzz target in the repository for a bounded time each (one at a time: `go
# test -fuzz` takes one target per run), and prints how many inputs each one tried.
#
#   scripts/fuzz.sh 3s     # make test: a short pass over each target
#   scripts/fuzz.sh 5m     # make fuzz: a longer hunt
#
# A failing input is written by Go under the package's testdata/fuzz/<Target>/ and the run
# stops with its error; commit that file with the fix, so the plain test suite replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-5s}
export PATH=/usr/local/go/bin:$PATH
# Each new interesting input is minimized before fuzzing goes on (up to a minute by default).
# On a slow target (FuzzXLSXMatchesExcelize writes and reads a workbook twice per input) that
# took a whole short pass: execs stood still while the worker minimized. A short pass keeps
# minimizing to a second; a finding is still written (less minimized) and replays as before.
minimize=()
if [[ $time =~ ^([0-9]+)s$ ]] && ((BASH_REMATCH[1] <= 30)); then
  minimize=(-fuzzminimizetime 1s)
fi
mapfile -t targets < <(grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r f; do
  pkg=./$(dirname "${f#./}")
  grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed "s|^func |$pkg |"
done)
printf '%-20s %-28s %12s\n' package target execs
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  if ! out=$(go test -run '^$' -fuzz "^${name}\$" -fuzztime "$time" "${minimize[@]}" -parallel 2 "$pkg" 2>&1); then
    # A slow target can still be running an input when the time is up, and Go then reports
    # "context deadline exceeded" without a finding. A finding always writes its input.
    if grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written' <<<"$out"; then
      execs=$(grep -o 'execs: [0-9]*' <<<"$out" | tail -1 | grep -o '[0-9]*' || echo "?")
      printf '%-20s %-28s %12s (time ran out mid-input; no finding)\n' "$pkg" "$name" "$execs"
      continue
    fi
    echo "$out"; echo "fuzz: $name in $pkg failed" >&2; exit 1
  fi
  execs=$(grep -o 'execs: [0-9]*' <<<"$out" | tail -1 | grep -o '[0-9]*' || echo "?")
  printf '%-20s %-28s %12s\n' "$pkg" "$name" "$execs"
done
