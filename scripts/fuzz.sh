#!/usr/bin/env bash
# Runs every Go fuzz target in the repository for a bounded time each, and prints how many
# inputs each one tried.
#
#   scripts/fuzz.sh 3s     # make test: a short pass over each target
#   scripts/fuzz.sh 5m     # make fuzz: a longer hunt
#
# Each package's test binary is built once, with the fuzzing instrumentation (`go test -c
# -fuzz`), two packages at a time; its targets then run one after another from that binary
# (a fuzz run takes one target), each with the package directory as its working directory and
# Go's fuzz cache, as `go test -fuzz` would run them. Building per target instead linked the
# same binary again for every target: more time than the fuzzing itself in a short pass.
#
# A failing input is written by Go under the package's testdata/fuzz/<Target>/ and the run
# stops with its error; commit that file with the fix, so the plain test suite replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
time=${1:-5s}
export PATH=/usr/local/go/bin:$PATH
# Each new interesting input is minimized before fuzzing goes on (up to a minute by default).
# On a slow target (FuzzXLSXMatchesExcelize writes and reads a workbook twice per input) that
# took a whole short pass: execs stood still while the worker minimized. A short pass keeps
# minimizing to a second; a finding is still written (less minimized) and replays as before.
minimize=()
if [[ $time =~ ^([0-9]+)s$ ]] && ((BASH_REMATCH[1] <= 30)); then
  minimize=(-test.fuzzminimizetime 1s)
fi
mapfile -t targets < <(grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r f; do
  pkg=./$(dirname "${f#./}")
  grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed "s|^func |$pkg |"
done)
mapfile -t pkgs < <(printf '%s\n' "${targets[@]}" | cut -d' ' -f1 | sort -u)

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
# binary PKG: where PKG's fuzzing test binary goes.
binary() { local p=${1#./}; echo "$bin/${p//\//_}.test"; }
export -f binary
export bin
# The -fuzz pattern only asks for the instrumentation: the binary fuzzes whichever target
# -test.fuzz names.
if ! printf '%s\n' "${pkgs[@]}" | xargs -P 2 -I{} bash -c 'go test -c -fuzz . -o "$(binary {})" {}'; then
  echo "fuzz: building the fuzzing test binaries failed" >&2; exit 1
fi

fuzzcache=$(go env GOCACHE)/fuzz
module=$(go list -m)
printf '%-20s %-28s %12s\n' package target execs
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  if ! out=$(cd "$root/$pkg" && "$(binary "$pkg")" -test.run '^$' -test.fuzz "^${name}\$" -test.fuzztime "$time" \
    "${minimize[@]}" -test.parallel 2 -test.timeout 0 -test.fuzzcachedir "$fuzzcache/$module/${pkg#./}" 2>&1); then
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
