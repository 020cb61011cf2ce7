#!/usr/bin/env bash
# Runs the benchmarks on the embedded store and on a throwaway PostgreSQL with
# its default durability settings (fsync and synchronous_commit on) plus a
# JetStream-enabled nats-server: `append` (event store) and `debates`
# (demo debates over HTTP); `reads` (detail, list and leaderboard against
# /healthz, and the list at 100 000 debates), `ws` (WebSocket push latency and
# idle-socket memory), `webhooks` (deliveries per second), `receipts`
# (receipts verified per second offline) and `ui` (the web UI in Chromium:
# first paint, streamed text to screen, page size over a long debate) on request.
# `ops/bench/run.sh debates` runs one of them.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v nats-server >/dev/null || apt-get install -y nats-server >/dev/null
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
PORT=$(free_port)
NATS_PORT=$(free_port)
WORK=$(mktemp -d /tmp/agon-bench.XXXXXX); chmod 755 "$WORK"; chown postgres:postgres "$WORK"; mkdir -p "$WORK/pg" "$WORK/nats"; chown postgres:postgres "$WORK/pg"
NATS_PID=""
stop() {
  [ -n "$NATS_PID" ] && kill "$NATS_PID" 2>/dev/null || true
  su postgres -s /bin/sh -c "'$PG_BIN/pg_ctl' -D '$WORK/pg' -m fast stop" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap stop EXIT
su postgres -s /bin/sh -c "'$PG_BIN/initdb' -D '$WORK/pg' -U postgres --auth=trust >/dev/null"
su postgres -s /bin/sh -c "'$PG_BIN/pg_ctl' -D '$WORK/pg' -l '$WORK/pg.log' -w start -o \"-c listen_addresses=127.0.0.1 -p $PORT -k $WORK -c max_connections=200\"" >/dev/null
nats-server -js -a 127.0.0.1 -p "$NATS_PORT" -sd "$WORK/nats" >"$WORK/nats.log" 2>&1 &
NATS_PID=$!
for _ in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$NATS_PORT) 2>/dev/null && break; sleep 0.1; done
export AGON_BENCH_DATABASE_URL="postgres://postgres@127.0.0.1:$PORT/postgres"
export AGON_BENCH_NATS_URL="nats://127.0.0.1:$NATS_PORT"
# `ws` holds 10 000 sockets open at once (client and service ends).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
for bench in ${1:-append debates}; do
  if [ "$bench" = ui ]; then
    # The web UI in Chromium against the release binary (a Python with
    # playwright 1.65: PYTHON, default python3; see tests/ui).
    cargo build --release --bin agon
    "${PYTHON:-python3}" ops/bench/ui.py
  else
    cargo bench --bench "$bench"
  fi
done
