#!/usr/bin/env bash
# Runs every check and test of the project on a fresh Debian 12 machine as root:
# installs PostgreSQL and nats-server when missing, starts throwaway instances
# on free loopback ports with their data in a temp dir, runs fmt, clippy and
# the whole test suite against both back ends, and always stops what it started.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*"; }

pg_bin() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  [ -n "$dir" ] && [ -x "$dir/initdb" ] && echo "$dir"
}

if [ -z "$(pg_bin)" ] || ! command -v nats-server >/dev/null 2>&1; then
  log "installing postgresql and nats-server"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql nats-server >/dev/null
fi
PG_BIN=$(pg_bin)
# initdb refuses to run as root; the server runs as this user.
id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
NATS_SERVER=$(command -v nats-server)

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

WORK=$(mktemp -d /tmp/agon-test.XXXXXX)
chmod 755 "$WORK"
chown postgres:postgres "$WORK"
PG_PORT=$(free_port)
NATS_PORT=$(free_port)
NATS_PID=""

cleanup() {
  set +e
  if [ -n "$NATS_PID" ]; then kill "$NATS_PID" 2>/dev/null; wait "$NATS_PID" 2>/dev/null; fi
  if [ -f "$WORK/pg/postmaster.pid" ]; then
    su postgres -s /bin/sh -c "'$PG_BIN/pg_ctl' -D '$WORK/pg' -m fast stop" >/dev/null 2>&1
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

log "starting PostgreSQL on 127.0.0.1:$PG_PORT"
mkdir -p "$WORK/pg" "$WORK/pgsock"
chown postgres:postgres "$WORK/pg" "$WORK/pgsock"
su postgres -s /bin/sh -c "'$PG_BIN/initdb' -D '$WORK/pg' -U postgres --auth=trust -E UTF8 --no-locale" >/dev/null
su postgres -s /bin/sh -c "'$PG_BIN/pg_ctl' -D '$WORK/pg' -l '$WORK/pg.log' -w start \
  -o \"-c listen_addresses=127.0.0.1 -p $PG_PORT -k $WORK/pgsock -c fsync=off -c max_connections=400\"" >/dev/null

log "starting nats-server (JetStream) on 127.0.0.1:$NATS_PORT"
mkdir -p "$WORK/nats"
"$NATS_SERVER" -js -a 127.0.0.1 -p "$NATS_PORT" -sd "$WORK/nats" >"$WORK/nats.log" 2>&1 &
NATS_PID=$!
for _ in $(seq 1 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$NATS_PORT") 2>/dev/null && break
  sleep 0.1
done

# Tests create one fresh database per test on this server.
export AGON_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres"
export AGON_TEST_NATS_URL="nats://127.0.0.1:$NATS_PORT"
# Tests that restart NATS mid-stream start their own server with this binary.
export AGON_TEST_NATS_SERVER="$NATS_SERVER"

log "cargo fmt --check"
cargo fmt --all -- --check
log "cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
log "cargo test (SQLite and PostgreSQL back ends, in-process bus and NATS JetStream)"
cargo test --workspace 2>&1 | tee "$WORK/test.log"
# One closing line for the whole run (cargo prints one per test binary).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "%d passed, %d failed\n", p, f; exit (f > 0 || p == 0) }' "$WORK/test.log"
