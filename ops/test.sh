#!/usr/bin/env bash
# Runs every check and test of the project on a fresh Debian 12 machine as root:
# installs PostgreSQL, nats-server, redis-server, Node.js and the C libraries
# of SAML's XML signatures when missing (and the
# Python tools schemathesis and openapi-spec-validator, and moto's S3 server), starts throwaway
# PostgreSQL and NATS on free loopback ports with their data in a temp dir,
# runs fmt, clippy, the whole test suite against both back ends, the
# upstream Python SDK's suite (tests/sdk), the web UI's browser suite
# (tests/ui, Chromium) and schemathesis against the served
# OpenAPI document, and always stops what it started.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

log() { printf '==> %s\n' "$*"; }

pg_bin() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  [ -n "$dir" ] && [ -x "$dir/initdb" ] && echo "$dir"
}

if [ -z "$(pg_bin)" ] || ! command -v nats-server >/dev/null 2>&1 || ! command -v redis-server >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
  log "installing postgresql, nats-server, redis-server and curl"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql nats-server redis-server curl >/dev/null
fi
# SAML sign-in (the `saml` feature) checks XML signatures with libxmlsec1.
if ! pkg-config --exists xmlsec1-openssl 2>/dev/null || ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1; then
  log "installing libxmlsec1, libxml2, OpenSSL and libclang headers (SAML)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq libxmlsec1-dev libxml2-dev libssl-dev pkg-config libclang-dev >/dev/null
fi
if ! python3 -c 'import schemathesis, openapi_spec_validator' >/dev/null 2>&1; then
  log "installing schemathesis and openapi-spec-validator"
  python3 -m pip install -q --disable-pip-version-check 'schemathesis>=4,<5' 'openapi-spec-validator>=0.7' >/dev/null
fi
if ! python3 -c 'import moto.server, flask' >/dev/null 2>&1; then
  log "installing moto's S3 server"
  python3 -m pip install -q --disable-pip-version-check 'moto[server]>=5,<6' >/dev/null
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  log "installing Node.js (the test identity providers run on it)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq nodejs npm >/dev/null
fi
# The identity providers the sign-in tests go through (tests/idp): the
# locked versions, from the npm registry.
log "installing the test identity providers (tests/idp)"
for attempt in 1 2; do
  if (cd tests/idp && npm ci --no-audit --no-fund --loglevel=error >/dev/null); then break; fi
  [ "$attempt" = 2 ] && { log "npm ci failed twice in tests/idp"; exit 1; }
done
SCHEMATHESIS=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/st
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
AGON_PID=""

cleanup() {
  set +e
  if [ -n "$AGON_PID" ]; then kill "$AGON_PID" 2>/dev/null; wait "$AGON_PID" 2>/dev/null; fi
  if [ -n "$NATS_PID" ]; then kill "$NATS_PID" 2>/dev/null; wait "$NATS_PID" 2>/dev/null; fi
  if [ -f "$WORK/pg/postmaster.pid" ]; then
    su postgres -s /bin/sh -c "'$PG_BIN/pg_ctl' -D '$WORK/pg' -m fast stop" >/dev/null 2>&1
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# Each test's service holds a pool and its consumers' connections, and two
# run at once, some with several replicas: 400 ran out once the UI's tests
# joined.
log "starting PostgreSQL on 127.0.0.1:$PG_PORT"
mkdir -p "$WORK/pg" "$WORK/pgsock"
chown postgres:postgres "$WORK/pg" "$WORK/pgsock"
su postgres -s /bin/sh -c "'$PG_BIN/initdb' -D '$WORK/pg' -U postgres --auth=trust -E UTF8 --no-locale" >/dev/null
su postgres -s /bin/sh -c "'$PG_BIN/pg_ctl' -D '$WORK/pg' -l '$WORK/pg.log' -w start \
  -o \"-c listen_addresses=127.0.0.1 -p $PG_PORT -k $WORK/pgsock -c fsync=off -c max_connections=1500\"" >/dev/null

log "starting nats-server (JetStream) on 127.0.0.1:$NATS_PORT"
mkdir -p "$WORK/nats"
"$NATS_SERVER" -js -a 127.0.0.1 -p "$NATS_PORT" -sd "$WORK/nats" >"$WORK/nats.log" 2>&1 &
NATS_PID=$!
wait_port() {
  for _ in $(seq 1 300); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
wait_port "$NATS_PORT"

# Tests create one fresh database per test on this server.
export AGON_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres"
export AGON_TEST_NATS_URL="nats://127.0.0.1:$NATS_PORT"
# Tests that restart NATS mid-stream start their own server with this binary.
export AGON_TEST_NATS_SERVER="$NATS_SERVER"
# Rate-limit tests start their own Redis with this binary.
export AGON_TEST_REDIS_SERVER=$(command -v redis-server)
# Backup storage tests start their own S3-compatible server (moto) with this.
export AGON_TEST_S3_SERVER=$(command -v moto_server || echo "$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/moto_server")

# One build from scratch: incremental state would only take disk.
export CARGO_INCREMENTAL=0
# Tests open many sockets at once (one holds a thousand stalled
# connections); a machine's default soft limit of 1024 is too few.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# What the run had to work with, at its start and its end: a run that fails
# broadly (many unrelated tests, a venv, the fuzzed server) is first read
# against these.
machine() {
  log "machine ($1): $(nproc) cores; memory available $(awk '/MemAvailable/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo);" \
    "disk free $(df -h --output=avail "$WORK" | tail -n 1 | tr -d ' ') under $WORK and $(df -h --output=avail "$ROOT" | tail -n 1 | tr -d ' ') under $ROOT;" \
    "open files $(ulimit -n); load $(cut -d ' ' -f 1-3 /proc/loadavg)"
}
machine start

# A virtual environment with `pip install` of the rest; made again once if
# the first attempt fails (a failed ensurepip leaves a venv without pip).
venv() {
  local dir=$1
  shift
  for attempt in 1 2; do
    if python3 -m venv "$dir" && "$dir/bin/pip" install -q --disable-pip-version-check "$@" >/dev/null; then
      return 0
    fi
    log "making the virtual environment $dir failed (attempt $attempt)"
    rm -rf "$dir"
  done
  return 1
}

log "cargo fmt --check"
cargo fmt --all -- --check
log "cargo clippy -D warnings (the default build, and with SAML)"
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy --workspace --all-targets --features saml -- -D warnings
log "cargo test (SQLite and PostgreSQL back ends, in-process bus and NATS JetStream; SAML on)"
TESTS_OK=1
# Every test binary runs even when an earlier one fails, so one failure
# does not hide the others.
cargo test --workspace --features saml --no-fail-fast 2>&1 | tee "$WORK/test.log" || TESTS_OK=0

log "the upstream Python SDK (aragora-sdk 2.11.0, unchanged) against the binary, both back ends"
SDK_OK=1
venv "$WORK/sdk" 'aragora-sdk==2.11.0' websockets standardwebhooks || SDK_OK=0
if [ "$SDK_OK" = 1 ]; then
  AGON_BINARY="$ROOT/target/debug/agon" "$WORK/sdk/bin/python" -W ignore -m unittest discover -s tests/sdk -v 2>&1 | tail -n 40 || SDK_OK=0
fi
[ "$SDK_OK" = 1 ] || log "the SDK suite failed (see above)"

log "the web UI in Chromium (tests/ui) against the release binary"
UI_OK=1
if [ ! -x /usr/bin/chromium ]; then
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; } || UI_OK=0
fi
cargo build --release --bin agon || UI_OK=0
# Playwright drives the system's Chromium: no `playwright install`.
venv "$WORK/ui" 'playwright==1.65.2' 'axe-playwright-python==0.1.8' pytest || UI_OK=0
if [ "$UI_OK" = 1 ]; then
  AGON_BIN="$ROOT/target/release/agon" "$WORK/ui/bin/python" -m pytest -q tests/ui 2>&1 | tail -n 40 || UI_OK=0
fi
[ "$UI_OK" = 1 ] || log "the browser suite failed (see above)"

log "schemathesis against the served OpenAPI document"
API_PORT=$(free_port)
mkdir -p "$WORK/st"
# A limit high enough that the fuzzer measures the API, not the limiter.
ST_TOKEN="schemathesis-static-token-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
SERVICE_DATA_DIR="$WORK/st" SERVICE_IP_RATE_LIMIT=1000000 SERVICE_LOG_LEVEL=ERROR \
  SERVICE_RATE_LIMIT_DEFAULT=1000000 SERVICE_RATE_LIMIT_AUTH=1000000 SERVICE_API_TOKEN="$ST_TOKEN" \
  SERVICE_RATE_LIMIT_DEBATE_CREATE=1000000 SERVICE_RATE_LIMIT_EXPORT=1000000 SERVICE_RATE_LIMIT_REGISTER=1000000 \
  SERVICE_RATE_LIMIT_DEBATE_LIST=1000000 SERVICE_RATE_LIMIT_HEALTH=1000000 SERVICE_RATE_LIMIT_ADMIN=1000000 \
  SERVICE_RATE_LIMIT_OAUTH=1000000 SERVICE_RATE_LIMIT_SSO=1000000 \
  target/debug/agon serve --api-port "$API_PORT" --ws-port "$(free_port)" --host 127.0.0.1 \
  >"$WORK/agon.log" 2>&1 &
AGON_PID=$!
wait_port "$API_PORT"
FUZZ_OK=1
# The document is public. The fuzzer runs twice: as the admin (the static
# token) and as a normal signed-up user, whose admin-only calls must be
# refused as documented; its own checks also send calls without a credential.
curl -sf "http://127.0.0.1:$API_PORT/api/openapi.json" >"$WORK/openapi.json" || FUZZ_OK=0
USER_TOKEN=$(python3 - "http://127.0.0.1:$API_PORT" <<'PY'
import json, sys, urllib.request
base = sys.argv[1]
account = {"email": "fuzz-user@example.com", "password": "fuzz-user-password-1", "name": "Fuzz"}
def post(path, body):
    request = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as response:
        return json.load(response)
post("/api/auth/register", account)
print(post("/api/auth/login", {"email": account["email"], "password": account["password"]})["access_token"])
PY
) || FUZZ_OK=0
for who in admin user; do
  if [ "$who" = admin ]; then TOKEN=$ST_TOKEN; else TOKEN=$USER_TOKEN; fi
  log "schemathesis as the $who"
  (cd "$WORK" && "$SCHEMATHESIS" --config-file "$ROOT/ops/schemathesis.toml" run "$WORK/openapi.json" --url "http://127.0.0.1:$API_PORT" \
    -H "Authorization: Bearer $TOKEN" --max-examples 25 --seed 1 --no-color) 2>&1 | tail -n 25 || FUZZ_OK=0
done
if ! kill -0 "$AGON_PID" 2>/dev/null; then
  FUZZ_OK=0
  log "the fuzzed service is no longer running"
fi
if [ "$FUZZ_OK" = 0 ]; then
  log "schemathesis found failures (see above); the service's log ends:"
  tail -n 40 "$WORK/agon.log" || true
fi
machine end
# One closing line for the whole run (cargo prints one per test binary).
SUMMARY_OK=1
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "%d passed, %d failed\n", p, f; exit (f > 0 || p == 0) }' "$WORK/test.log" || SUMMARY_OK=0
[ "$TESTS_OK" = 1 ] && [ "$SDK_OK" = 1 ] && [ "$UI_OK" = 1 ] && [ "$FUZZ_OK" = 1 ] && [ "$SUMMARY_OK" = 1 ]
