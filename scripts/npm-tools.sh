# Sourced, not run: how the scripts that bring a pinned npm tool (a11y.sh, contract.sh,
# oidc-provider.sh) install it. The caller sets src (the directory of its package.json and
# package-lock.json), work (where the tool is installed, under data/tools) and say.

# need_npm installs Node.js and npm from Debian's packages when there is no npm.
need_npm() {
	command -v npm >/dev/null && return
	say "installing Node.js and npm from Debian's packages"
	local sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get install -y -q nodejs npm >/dev/null || { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q nodejs npm >/dev/null; }
}

# npm_ci_pinned WHAT INSTALLED installs $src's pinned packages into $work with npm ci, unless
# INSTALLED (a path npm ci leaves) is there and the lock file installed is already this one.
npm_ci_pinned() {
	local what=$1 installed=$2
	mkdir -p "$work"
	if [ -e "$installed" ] && cmp -s "$src/package-lock.json" "$work/package-lock.json"; then
		return
	fi
	need_npm
	say "installing $what with npm ci"
	cp "$src/package.json" "$src/package-lock.json" "$work/"
	(cd "$work" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}
