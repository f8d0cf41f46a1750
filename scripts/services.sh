#!/usr/bin/env bash
# services.sh — make Redis, Postgres and (with the s3 storage backend) an S3 service
# available for taskcenter on this machine.
#
#   scripts/services.sh up       reuse what is reachable, otherwise install + start locally
#   scripts/services.sh down     stop what this script started (data is kept)
#   scripts/services.sh status   say what is reachable
#   scripts/services.sh s3       start only the S3 gateway (and create the bucket)
#   scripts/services.sh prune-test-dbs   drop the test databases store/storetest left (after the suite)
#   scripts/services.sh tools    install what the tests need besides the servers (promtool, chromium, pgbouncer, redis-sentinel, versitygw,
#                                the npm tools of scripts/contract.sh, scripts/a11y.sh and scripts/oidc-provider.sh)
#
# Addresses come from the same variables the service reads:
#   TASKCENTER_DATABASE_URL  default postgres://taskcenter:taskcenter@127.0.0.1:5432/taskcenter?sslmode=disable
#   TASKCENTER_REDIS_ADDR    default 127.0.0.1:6379
#   TASKCENTER_DATA_DIR      default <repo>/data  (Redis, Postgres and S3 gateway data live under it)
#   TASKCENTER_STORAGE_BACKEND, _ENDPOINT, _BUCKET, _REGION, _ACCESS_KEY, _SECRET_KEY
#                            else storage.* of the config file ($TASKCENTER_CONFIG, else
#                            configs/taskcenter.yaml); defaults local, 127.0.0.1:7070, taskcenter,
#                            us-east-1 and, on a loopback endpoint, the development credentials
#                            taskcenter-dev / taskcenter-dev-secret (internal/config's DevAccessKey)
#
# With storage backend s3 and a loopback endpoint that does not answer, `up` starts the Versity
# S3 Gateway (versitygw, installed by `tools` into $GOPATH/bin) over <data dir>/s3 with those
# credentials, and creates the bucket.
#
# When a server is not reachable and its address is on this machine, the script installs the
# Debian package if needed (apt-get, as root or through sudo) and starts a private instance
# with its data under the data dir: Redis with appendonly persistence, Postgres initialised
# and run as a non-root user (Postgres refuses to run as root). Running it twice is harmless.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
data_dir=${TASKCENTER_DATA_DIR:-$repo/data}
case $data_dir in /*) ;; *) data_dir=$repo/$data_dir ;; esac
db_url=${TASKCENTER_DATABASE_URL:-postgres://taskcenter:taskcenter@127.0.0.1:5432/taskcenter?sslmode=disable}
redis_addr=${TASKCENTER_REDIS_ADDR:-127.0.0.1:6379}

log() { printf 'services: %s\n' "$*" >&2; }
die() { printf 'services: error: %s\n' "$*" >&2; exit 1; }

# --- parse addresses ---------------------------------------------------------------------
re='^postgres(ql)?://([^:@/]+)(:([^@/]*))?@([^:/?]+)(:([0-9]+))?/([^?]+)'
[[ $db_url =~ $re ]] || die "TASKCENTER_DATABASE_URL must look like postgres://user:password@host:port/dbname, got '$db_url'"
pg_user=${BASH_REMATCH[2]}
pg_pass=${BASH_REMATCH[4]}
pg_host=${BASH_REMATCH[5]}
pg_port=${BASH_REMATCH[7]:-5432}
pg_db=${BASH_REMATCH[8]}
redis_host=${redis_addr%:*}
redis_port=${redis_addr##*:}
[[ $redis_port =~ ^[0-9]+$ ]] || die "TASKCENTER_REDIS_ADDR must be host:port, got '$redis_addr'"

is_local() { [[ $1 == 127.0.0.1 || $1 == localhost || $1 == ::1 ]]; }

# --- storage settings: the environment, else the config file's storage: section ----------
config_file=${TASKCENTER_CONFIG:-}
[[ -n $config_file ]] || { [[ -f $repo/configs/taskcenter.yaml ]] && config_file=$repo/configs/taskcenter.yaml; }
# storage_conf KEY: the value of storage.KEY in the config file (a plain scalar), or nothing.
storage_conf() {
  [[ -n $config_file && -f $config_file ]] || return 0
  awk -v key="$1" '
    /^[^[:space:]#]/ { in_storage = ($1 == "storage:") ; next }
    in_storage && $1 == key":" { v = $2; gsub(/^["'\'']|["'\'']$/, "", v); print v; exit }
  ' "$config_file"
}
storage_backend=${TASKCENTER_STORAGE_BACKEND:-$(storage_conf backend)}; storage_backend=${storage_backend:-local}
s3_endpoint=${TASKCENTER_STORAGE_ENDPOINT:-$(storage_conf endpoint)}; s3_endpoint=${s3_endpoint:-127.0.0.1:7070}
s3_bucket=${TASKCENTER_STORAGE_BUCKET:-$(storage_conf bucket)}; s3_bucket=${s3_bucket:-taskcenter}
s3_region=${TASKCENTER_STORAGE_REGION:-$(storage_conf region)}; s3_region=${s3_region:-us-east-1}
s3_scheme=http
case $s3_endpoint in https://*) s3_scheme=https ;; esac
s3_addr=${s3_endpoint#*://}; s3_addr=${s3_addr%/}
s3_host=${s3_addr%:*}; s3_host=${s3_host#[}; s3_host=${s3_host%]}
s3_port=${s3_addr##*:}
[[ $s3_addr == *:* ]] || { s3_host=$s3_addr; s3_port=$([[ $s3_scheme == https ]] && echo 443 || echo 80); }
s3_access=${TASKCENTER_STORAGE_ACCESS_KEY:-}
s3_secret=${TASKCENTER_STORAGE_SECRET_KEY:-}
if [[ -z $s3_access && -z $s3_secret ]] && is_local "$s3_host"; then
  s3_access=taskcenter-dev; s3_secret=taskcenter-dev-secret
fi

# tcp_open HOST PORT: true when something accepts connections there.
tcp_open() { timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }

redis_ping() {
  timeout 2 bash -c "exec 3<>/dev/tcp/$redis_host/$redis_port; printf 'PING\r\n' >&3; head -c 5 <&3" 2>/dev/null | grep -q PONG
}

as_root() {
  if [[ $(id -u) == 0 ]]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else die "need root to run: $* (install it yourself, or run as root)"; fi
}

apt_install() {
  log "installing Debian package(s): $*"
  export DEBIAN_FRONTEND=noninteractive
  if ! as_root apt-get install -y -q --no-install-recommends "$@" >/dev/null; then
    as_root apt-get update -q >/dev/null || true
    as_root apt-get install -y -q --no-install-recommends "$@" >/dev/null || die "apt-get install $* failed"
  fi
}

wait_for() { # wait_for SECONDS CMD...
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

# --- Redis -------------------------------------------------------------------------------
redis_dir=$data_dir/redis

redis_up() {
  if redis_ping; then log "redis: reachable at $redis_addr, reusing it"; return; fi
  is_local "$redis_host" || die "redis: $redis_addr is not reachable and not on this machine; start it or fix TASKCENTER_REDIS_ADDR"
  tcp_open "$redis_host" "$redis_port" && die "redis: something listens on $redis_addr but does not answer PING; free the port or set TASKCENTER_REDIS_ADDR"
  command -v redis-server >/dev/null || apt_install redis-server
  mkdir -p "$redis_dir"
  log "redis: starting on $redis_addr, data in $redis_dir"
  # databases 64: the test suite leases one logical database per test.
  redis-server --bind "$redis_host" --port "$redis_port" --dir "$redis_dir" \
    --appendonly yes --appendfsync everysec --databases 64 \
    --daemonize yes --pidfile "$redis_dir/redis.pid" --logfile "$redis_dir/redis.log" \
    --save "" --protected-mode yes </dev/null >/dev/null 2>&1 9>&-
  wait_for 15 redis_ping || die "redis did not start; see $redis_dir/redis.log"
}

redis_down() {
  if [[ -f $redis_dir/redis.pid ]] && kill -0 "$(cat "$redis_dir/redis.pid")" 2>/dev/null; then
    log "redis: stopping"
    kill "$(cat "$redis_dir/redis.pid")"
    wait_for 15 bash -c "! kill -0 $(cat "$redis_dir/redis.pid") 2>/dev/null" || log "redis: still running"
  fi
}

# --- Postgres ----------------------------------------------------------------------------
pg_root=$data_dir/postgres

pg_bindir() {
  local d
  if command -v pg_config >/dev/null && d=$(pg_config --bindir 2>/dev/null) && [[ -x $d/initdb ]]; then echo "$d"; return; fi
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [[ -n $d && -x $d/initdb ]] && echo "$d"
}

# pg_login: true when the configured user can log in to the configured database.
pg_login() { PGPASSWORD=$pg_pass PGCONNECT_TIMEOUT=3 psql -X -q -h "$pg_host" -p "$pg_port" -U "$pg_user" -d "$pg_db" -c 'select 1' >/dev/null 2>&1; }

# The OS user that owns and runs our private cluster: postgres refuses root.
pg_os_user() {
  if [[ $(id -u) != 0 ]]; then id -un; return; fi
  id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
  echo postgres
}

as_pg() { # run a command as the cluster's OS user (from /, which it can always enter)
  if [[ $(id -u) == 0 ]]; then (cd / && runuser -u "$(pg_os_user)" -- "$@"); else "$@"; fi
}

sql_literal() { printf "'%s'" "${1//\'/\'\'}"; }
sql_ident() { printf '"%s"' "${1//\"/\"\"}"; }

# pg_bootstrap PSQL_ARGS...: create the role and database as a superuser, idempotently.
pg_bootstrap() {
  local role db pass
  role=$(sql_ident "$pg_user"); db=$(sql_ident "$pg_db"); pass=$(sql_literal "$pg_pass")
  as_pg "$(pg_bindir)/psql" -X -q -v ON_ERROR_STOP=1 "$@" -d postgres <<SQL >/dev/null
SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', $(sql_literal "$pg_user"), $(sql_literal "$pg_pass"))
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $(sql_literal "$pg_user")) \gexec
ALTER ROLE $role LOGIN PASSWORD $pass;
SELECT format('CREATE DATABASE %I OWNER %I', $(sql_literal "$pg_db"), $(sql_literal "$pg_user"))
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = $(sql_literal "$pg_db")) \gexec
SQL
  # Tests copy a migrated template database per test (store/storetest): the role creates
  # databases. Without that right each test gets a schema of the database, migrated one by one.
  as_pg "$(pg_bindir)/psql" -X -q -v ON_ERROR_STOP=1 "$@" -d postgres -c "ALTER ROLE $role CREATEDB" >/dev/null
  as_pg "$(pg_bindir)/psql" -X -q -v ON_ERROR_STOP=1 "$@" -d postgres -c "GRANT ALL ON DATABASE $db TO $role" >/dev/null
}

# pg_may_create_db: whether our role may create databases.
pg_may_create_db() {
  [[ $(PGPASSWORD=$pg_pass PGCONNECT_TIMEOUT=3 psql -X -q -At -h "$pg_host" -p "$pg_port" -U "$pg_user" -d "$pg_db" \
    -c 'SELECT rolcreatedb FROM pg_roles WHERE rolname = current_user' 2>/dev/null) == t ]]
}

# pg_prune_test_dbs drops the databases the tests left (store/storetest names them
# tctest_<unix seconds, hex>_<random> and leaves them: in Postgres 15 each DROP DATABASE forces
# a checkpoint, which in the middle of the suite kept its tests waiting on fsync). One made in
# the last minute, or with someone connected (a run in progress), is left alone; so is any
# database not named that way. Eight sessions drop at once (2026-12-03, host vm: 103 databases
# in 9 s, 89 ms each, where one session took 114 ms each).
pg_prune_test_dbs() {
  local list; list=$(mktemp)
  PGPASSWORD=$pg_pass PGCONNECT_TIMEOUT=3 psql -X -q -At -h "$pg_host" -p "$pg_port" -U "$pg_user" -d "$pg_db" <<'SQL' >"$list" 2>/dev/null || true
SELECT format('DROP DATABASE IF EXISTS %I;', datname) FROM pg_database
WHERE datname ~ '^tctest_[0-9a-f]+_[a-z0-9]+$'
  AND ('x' || lpad(split_part(datname, '_', 2), 16, '0'))::bit(64)::bigint < extract(epoch FROM now()) - 60
  AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = pg_database.datname)
ORDER BY datname
SQL
  local i
  for i in 0 1 2 3 4 5 6 7; do
    awk -v i="$i" 'NR % 8 == i' "$list" |
      PGPASSWORD=$pg_pass PGCONNECT_TIMEOUT=3 psql -X -q -At -h "$pg_host" -p "$pg_port" -U "$pg_user" -d "$pg_db" >/dev/null 2>&1 &
  done
  wait
  rm -f "$list"
}

# pg_own_socket prints the socket directory of the private cluster this script started, when
# it runs.
pg_own_socket() {
  [[ -e $pg_root ]] || return 1
  local sock; sock=$(readlink -f "$pg_root")/run
  if [[ ${#sock} -gt 90 ]]; then sock=/tmp/taskcenter-pg-$pg_port; fi
  [[ -S $sock/.s.PGSQL.$pg_port ]] && echo "$sock"
}

# pg_data_path prints where the cluster's files live. They live under the data dir; when the
# data dir is not reachable by the cluster's OS user (a checkout under /root, say), the files
# go to /var/lib/taskcenter/<hash> and the data dir holds a symlink to them.
pg_data_path() {
  local user; user=$(pg_os_user)
  if [[ -L $pg_root ]]; then readlink -f "$pg_root"; return; fi
  mkdir -p "$pg_root"
  if [[ $(id -u) == 0 ]]; then
    chown "$user" "$pg_root"
    if ! (cd / && runuser -u "$user" -- test -w "$pg_root"); then
      rmdir "$pg_root"
      local alt; alt=/var/lib/taskcenter/$(printf '%s' "$pg_root" | sha256sum | cut -c1-12)/postgres
      mkdir -p "$alt"; chown "$user" "$alt"
      ln -s "$alt" "$pg_root"
      log "postgres: $data_dir is not reachable by OS user '$user'; cluster files live in $alt (linked from $pg_root)"
      echo "$alt"; return
    fi
  fi
  echo "$pg_root"
}

pg_up() {
  command -v psql >/dev/null || apt_install postgresql-client
  if tcp_open "$pg_host" "$pg_port"; then
    if pg_login; then
      log "postgres: reachable at $pg_host:$pg_port, reusing it"
      # A cluster this script started before the role was given CREATEDB gets it now.
      local own
      if ! pg_may_create_db && own=$(pg_own_socket); then pg_bootstrap -h "$own" -p "$pg_port" -U postgres; fi
      return
    fi
    # A server runs there but our role or database is missing. If it is this machine's own
    # Debian cluster, bootstrap through its peer-authenticated socket.
    if [[ $(id -u) == 0 ]] && id postgres >/dev/null 2>&1 && [[ -d /var/run/postgresql ]] &&
      (cd / && runuser -u postgres -- psql -X -q -h /var/run/postgresql -p "$pg_port" -d postgres -c 'select 1' >/dev/null 2>&1); then
      log "postgres: creating role '$pg_user' and database '$pg_db' in the cluster on port $pg_port"
      pg_bootstrap -h /var/run/postgresql -p "$pg_port"
      pg_login && return
    fi
    die "postgres: a server listens on $pg_host:$pg_port but user '$pg_user' cannot log in to '$pg_db'. Create them, or point TASKCENTER_DATABASE_URL at another port and run again to get a private cluster there."
  fi
  is_local "$pg_host" || die "postgres: $pg_host:$pg_port is not reachable and not on this machine; start it or fix TASKCENTER_DATABASE_URL"
  [[ -n $(pg_bindir) ]] || apt_install postgresql
  local bin pgdata sock user
  bin=$(pg_bindir) || die "postgres: no initdb found after installing"
  user=$(pg_os_user)
  pgdata=$(pg_data_path)/data
  sock=$(dirname "$pgdata")/run
  if [[ ${#sock} -gt 90 ]]; then sock=/tmp/taskcenter-pg-$pg_port; fi
  as_pg mkdir -p "$sock"
  if [[ ! -f $pgdata/PG_VERSION ]]; then
    log "postgres: initialising a cluster in $pgdata (OS user $user)"
    local pwfile; pwfile=$(as_pg mktemp)
    as_pg bash -c "printf '%s' \"\$1\" > '$pwfile'" _ "$(openssl rand -hex 16 2>/dev/null || date +%s%N)"
    as_pg "$bin/initdb" -D "$pgdata" -U postgres --pwfile="$pwfile" -E UTF8 --no-locale \
      --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    as_pg rm -f "$pwfile"
  fi
  log "postgres: starting on $pg_host:$pg_port"
  as_pg "$bin/pg_ctl" -D "$pgdata" -l "$(dirname "$pgdata")/postgres.log" -w -t 60 \
    -o "-c listen_addresses=$pg_host -p $pg_port -k $sock -c max_connections=300" start </dev/null >/dev/null 2>&1 9>&- ||
    die "postgres did not start; see $(dirname "$pgdata")/postgres.log"
  pg_bootstrap -h "$sock" -p "$pg_port" -U postgres
  wait_for 15 pg_login || die "postgres: started, but '$pg_user' cannot log in to '$pg_db'"
}

pg_down() {
  [[ -e $pg_root ]] || return 0
  local pgdata; pgdata=$(readlink -f "$pg_root")/data
  if [[ -f $pgdata/postmaster.pid ]]; then
    log "postgres: stopping"
    as_pg "$(pg_bindir)/pg_ctl" -D "$pgdata" -m fast -w stop >/dev/null || log "postgres: pg_ctl stop failed"
  fi
}

# --- S3 (the Versity S3 Gateway) ----------------------------------------------------------
s3_dir=$data_dir/s3

versitygw_bin() {
  local gobin p
  if p=$(command -v versitygw); then echo "$p"; return; fi
  command -v go >/dev/null || PATH="/usr/local/go/bin:$PATH"
  if command -v go >/dev/null; then
    gobin="$(go env GOBIN)"; [[ -n $gobin ]] || gobin="$(go env GOPATH | cut -d: -f1)/bin"
    [[ -x $gobin/versitygw ]] && { echo "$gobin/versitygw"; return; }
  fi
  [[ -x $repo/bin/versitygw ]] && { echo "$repo/bin/versitygw"; return; }
  return 1
}

# s3_answers: true when an HTTP server answers at the endpoint (S3 answers 403 to anonymous).
s3_answers() { curl -s -o /dev/null --max-time 2 -k "$s3_scheme://$s3_addr/"; }

# s3_bucket_up: create the bucket, unless it exists (signed with the root credentials).
s3_bucket_up() {
  local code
  code=$(curl -s -o "$s3_dir.bucket.out" -w '%{http_code}' --max-time 10 -k --aws-sigv4 "aws:amz:$s3_region:s3" \
    -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
    --user "$s3_access:$s3_secret" -X PUT "$s3_scheme://$s3_addr/$s3_bucket") || code=000
  case $code in
    200) log "s3: created bucket '$s3_bucket'" ;;
    409) ;; # BucketAlreadyOwnedByYou: it exists
    *) log "s3: could not create bucket '$s3_bucket' (HTTP $code: $(head -c 300 "$s3_dir.bucket.out" 2>/dev/null)); set storage.create_bucket or create it yourself" ;;
  esac
  rm -f "$s3_dir.bucket.out"
}

s3_up() {
  [[ $storage_backend == s3 ]] || return 0
  [[ -n $s3_access && -n $s3_secret ]] || die "s3: no credentials: set TASKCENTER_STORAGE_ACCESS_KEY and TASKCENTER_STORAGE_SECRET_KEY"
  if s3_answers; then
    log "s3: reachable at $s3_addr, reusing it"
    s3_bucket_up
    return
  fi
  is_local "$s3_host" || die "s3: $s3_endpoint is not reachable and not on this machine; start it or fix TASKCENTER_STORAGE_ENDPOINT"
  tcp_open "$s3_host" "$s3_port" && die "s3: something listens on $s3_addr but does not answer HTTP; free the port or set TASKCENTER_STORAGE_ENDPOINT"
  [[ $s3_scheme == http ]] || die "s3: the local gateway this script starts speaks plain HTTP; use an http endpoint (storage.tls false)"
  local bin
  if ! bin=$(versitygw_bin); then
    log "s3: versitygw not found; installing it (about 90 s, once)"
    tools_versitygw
    bin=$(versitygw_bin) || die "s3: versitygw is still missing after installing it"
  fi
  mkdir -p "$s3_dir/root"
  log "s3: starting versitygw on $s3_addr, objects in $s3_dir/root"
  # versitygw stays in the foreground: detach it, fd 9 (our lock) closed, its pid kept.
  ROOT_ACCESS_KEY=$s3_access ROOT_SECRET_KEY=$s3_secret setsid "$bin" --port "$s3_addr" --region "$s3_region" --quiet \
    posix "$s3_dir/root" </dev/null >>"$s3_dir/versitygw.log" 2>&1 9>&- &
  echo $! >"$s3_dir/versitygw.pid"
  wait_for 30 s3_answers || die "s3: versitygw did not start; see $s3_dir/versitygw.log"
  s3_bucket_up
}

s3_down() {
  local pid
  [[ -f $s3_dir/versitygw.pid ]] || return 0
  pid=$(cat "$s3_dir/versitygw.pid")
  if kill -0 "$pid" 2>/dev/null; then
    log "s3: stopping versitygw"
    kill "$pid"
    wait_for 15 bash -c "! kill -0 $pid 2>/dev/null" || log "s3: still running"
  fi
  rm -f "$s3_dir/versitygw.pid"
}

tools_versitygw() {
  local gobin
  command -v go >/dev/null || PATH="/usr/local/go/bin:$PATH"
  gobin="$(go env GOBIN)"; [[ -n $gobin ]] || gobin="$(go env GOPATH | cut -d: -f1)/bin"
  if ! command -v versitygw >/dev/null && [[ ! -x $gobin/versitygw ]]; then
    log "versitygw: installing (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)"
    go install github.com/versity/versitygw/cmd/versitygw@v1.8.0 || die "could not install versitygw"
  fi
}

# --- test tools --------------------------------------------------------------------------
# promtool (from Debian's prometheus package) checks the metrics and the alert rules;
# chromium (headless) drives the web page's browser tests (cmd/taskcenter/web_e2e_test.go);
# versitygw is the S3 server of the storage tests.
tools_up() {
  if ! command -v promtool >/dev/null; then
    apt_install prometheus
    command -v promtool >/dev/null || die "promtool is still missing after installing prometheus"
  fi
  if ! command -v chromium >/dev/null; then
    apt_install chromium
    command -v chromium >/dev/null || die "chromium is still missing after installing it"
  fi
  # The scale-out tests run real Sentinels and a real PgBouncer (each started by the test on
  # free ports under its temp dir; the packages' own services stay stopped).
  if ! command -v pgbouncer >/dev/null && [[ ! -x /usr/sbin/pgbouncer ]]; then
    apt_install pgbouncer
    systemctl disable --now pgbouncer >/dev/null 2>&1 || service pgbouncer stop >/dev/null 2>&1 || true
  fi
  if ! command -v redis-sentinel >/dev/null; then
    apt_install redis-sentinel
    systemctl disable --now redis-sentinel >/dev/null 2>&1 || service redis-sentinel stop >/dev/null 2>&1 || true
  fi
  # The object-storage tests run a real S3 server, the Versity S3 Gateway (each test starts
  # its own on a free port over a temp dir; internal/testenv/s3.go). Not packaged by Debian:
  # built from source through the Go module proxy into $GOPATH/bin (about 90 s, once).
  tools_versitygw
  # The OpenAPI document's outside checkers (Redocly's linter, openapi-typescript, tsc), from
  # the npm registry into data/tools/contract (scripts/contract.sh).
  "$(dirname "$0")/contract.sh" install
  # An OpenID provider written elsewhere (panva's oidc-provider), from the npm registry into
  # data/tools/oidc-provider, for the browser sign-in test against it.
  "$(dirname "$0")/oidc-provider.sh" install
  # axe-core, the accessibility checker the browser tests inject into the page, from the npm
  # registry into data/tools/a11y (scripts/a11y.sh).
  "$(dirname "$0")/a11y.sh" install
  # A CJK font, so the Chinese page's screenshots show characters rather than boxes.
  [[ -f /usr/share/fonts/truetype/wqy/wqy-microhei.ttc ]] || (apt_install fonts-wqy-microhei) || log "no CJK font: Chinese screenshots show boxes"
}

# --- main --------------------------------------------------------------------------------
cmd=${1:-up}
mkdir -p "$data_dir"
if [[ $cmd != status ]]; then
  # Serialise concurrent runs (two `make test` at once). Daemons are started with fd 9 closed
  # so they do not hold the lock after we exit.
  exec 9>"$data_dir/.services.lock"
  flock 9
fi
case $cmd in
  up)
    redis_up; pg_up; s3_up
    if [[ $storage_backend == s3 ]]; then
      log "ready: redis $redis_addr, postgres $pg_host:$pg_port/$pg_db, s3 $s3_addr/$s3_bucket"
    else
      log "ready: redis $redis_addr, postgres $pg_host:$pg_port/$pg_db"
    fi ;;
  s3) storage_backend=s3; s3_up; log "ready: s3 $s3_addr/$s3_bucket" ;;
  tools) tools_up ;;
  prune-test-dbs)
    before=$(PGPASSWORD=$pg_pass PGCONNECT_TIMEOUT=3 psql -X -q -At -h "$pg_host" -p "$pg_port" -U "$pg_user" -d "$pg_db" \
      -c "SELECT count(*) FROM pg_database WHERE datname ~ '^tctest_'" 2>/dev/null || echo 0)
    pg_prune_test_dbs
    after=$(PGPASSWORD=$pg_pass PGCONNECT_TIMEOUT=3 psql -X -q -At -h "$pg_host" -p "$pg_port" -U "$pg_user" -d "$pg_db" \
      -c "SELECT count(*) FROM pg_database WHERE datname ~ '^tctest_'" 2>/dev/null || echo 0)
    log "test databases: dropped $(( before - after )), $after left" ;;
  down) redis_down; pg_down; s3_down ;;
  status)
    if redis_ping; then log "redis: up at $redis_addr"; else log "redis: down"; fi
    if pg_login; then log "postgres: up at $pg_host:$pg_port/$pg_db"; else log "postgres: down or login refused"; fi
    if [[ $storage_backend == s3 ]]; then
      if s3_answers; then log "s3: up at $s3_addr (bucket $s3_bucket)"; else log "s3: down at $s3_addr"; fi
    else
      log "storage: local (the data dir)"
    fi ;;
  *) die "usage: $0 up|down|status|s3|tools|prune-test-dbs" ;;
esac
