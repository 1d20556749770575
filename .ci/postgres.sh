#!/usr/bin/env bash
# A throw-away PostgreSQL server for the test run: `source .ci/postgres.sh` installs the server
# if this machine lacks it, starts one on a Unix socket only (no TCP port: nothing else on the
# machine can reach it), exports ERRKB_TEST_PG_URL for the PostgreSQL tests, and stops it when
# the calling shell exits. PostgreSQL refuses to run as root, so it runs as the postgres user.
set -euo pipefail

pg_bin() {
  if command -v initdb >/dev/null 2>&1; then dirname "$(readlink -f "$(command -v initdb)")"; return; fi
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

PG_BIN=$(pg_bin)
if [ -z "$PG_BIN" ] || [ ! -x "$PG_BIN/initdb" ]; then
  echo "== installing PostgreSQL"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  PG_BIN=$(pg_bin)
fi
id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql postgres

PG_DIR=$(mktemp -d /tmp/errkb-pg.XXXXXX)
mkdir -p "$PG_DIR/data" "$PG_DIR/sock"
chown -R postgres "$PG_DIR"
runuser -u postgres -- "$PG_BIN/initdb" -D "$PG_DIR/data" -A trust -U postgres >/dev/null
runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log" -w \
  -o "-k $PG_DIR/sock -c listen_addresses='' -c max_connections=200 -c fsync=off" start >/dev/null
stop_postgres() {
  runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$PG_DIR"
}
trap stop_postgres EXIT
runuser -u postgres -- "$PG_BIN/createdb" -h "$PG_DIR/sock" -U postgres errkb_test
# libpq URL with the socket directory as host (psycopg 3 / SQLAlchemy form).
export ERRKB_TEST_PG_URL="postgresql+psycopg://postgres@/errkb_test?host=$PG_DIR/sock"
echo "== PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on $PG_DIR/sock"
