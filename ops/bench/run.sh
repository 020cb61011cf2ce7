#!/usr/bin/env bash
# Runs the append benchmark on SQLite and on a throwaway PostgreSQL with its
# default durability settings (fsync and synchronous_commit on).
set -euo pipefail
cd "$(dirname "$0")/../.."
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
WORK=$(mktemp -d /tmp/agon-bench.XXXXXX); chmod 755 "$WORK"; chown postgres:postgres "$WORK"; mkdir -p "$WORK/pg"; chown postgres:postgres "$WORK/pg"
stop() { su postgres -s /bin/sh -c "'$PG_BIN/pg_ctl' -D '$WORK/pg' -m fast stop" >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap stop EXIT
su postgres -s /bin/sh -c "'$PG_BIN/initdb' -D '$WORK/pg' -U postgres --auth=trust >/dev/null"
su postgres -s /bin/sh -c "'$PG_BIN/pg_ctl' -D '$WORK/pg' -l '$WORK/pg.log' -w start -o \"-c listen_addresses=127.0.0.1 -p $PORT -k $WORK\"" >/dev/null
AGON_BENCH_DATABASE_URL="postgres://postgres@127.0.0.1:$PORT/postgres" cargo bench --bench append
