#!/usr/bin/env bash
# The independently written OpenID provider the sign-in tests run against (panva's
# oidc-provider, scripts/oidc-provider/provider.mjs), installed from the npm registry, pinned
# by scripts/oidc-provider/package-lock.json, into data/tools/oidc-provider (not in the
# repository):
#   install   npm ci, unless the installed lock file is already this one
#   path      print the node_modules directory the tests hand to provider.mjs
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/scripts/oidc-provider
work=$root/data/tools/oidc-provider

say() { echo "oidc-provider: $*" >&2; }

install() {
	mkdir -p "$work"
	if [ -d "$work/node_modules/oidc-provider" ] && cmp -s "$src/package-lock.json" "$work/package-lock.json"; then
		return
	fi
	if ! command -v npm >/dev/null; then
		say "installing Node.js and npm from Debian's packages"
		if [ "$(id -u)" = 0 ]; then apt-get install -y -q nodejs npm >/dev/null; else sudo apt-get install -y -q nodejs npm >/dev/null; fi
	fi
	say "installing oidc-provider with npm ci"
	cp "$src/package.json" "$src/package-lock.json" "$work/"
	(cd "$work" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}

case ${1:-} in
	install) install ;;
	path) echo "$work/node_modules" ;;
	*) echo "usage: $0 install|path" >&2; exit 2 ;;
esac
