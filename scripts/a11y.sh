#!/usr/bin/env bash
# Installs axe-core, the accessibility checker the browser tests inject into the web page
# (cmd/taskcenter/web_a11y_e2e_test.go), from the npm registry, pinned by
# scripts/a11y/package-lock.json, into data/tools/a11y (not in the repository, and never served
# by the product). scripts/services.sh tools calls it; the test calls it when the file is
# missing. Running it again is harmless.
#   install   install it (a no-op when the pinned version is there)
#   path      print the path of axe.min.js
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/scripts/a11y
work=$root/data/tools/a11y
axe=$work/node_modules/axe-core/axe.min.js

say() { echo "a11y: $*" >&2; }

. "$root/scripts/npm-tools.sh"

install() {
	mkdir -p "$work"
	exec 8>"$work/.install.lock"
	flock 8
	npm_ci_pinned axe-core "$axe"
	[ -f "$axe" ] || { say "npm ci left no $axe"; exit 1; }
}

case "${1:-}" in
install) install ;;
path) echo "$axe" ;;
*) echo "usage: $0 install | path" >&2; exit 2 ;;
esac
