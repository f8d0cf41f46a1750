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

. "$root/scripts/npm-tools.sh"

install() {
	npm_ci_pinned oidc-provider "$work/node_modules/oidc-provider"
}

case ${1:-} in
	install) install ;;
	path) echo "$work/node_modules" ;;
	*) echo "usage: $0 install|path" >&2; exit 2 ;;
esac
