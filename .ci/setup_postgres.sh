#!/usr/bin/env bash
# Make the store's tests runnable (tests/postgres: a real PostgreSQL): Debian's server
# binaries installed. The tests start their own throwaway server from them on a free port
# in a temporary folder (as the postgres user under root), so the cluster Debian's package
# may create is stopped and left alone. Idempotent and fast when the binaries are there.
set -euo pipefail
cd "$(dirname "$0")/.."

pg_ctl=$(ls /usr/lib/postgresql/*/bin/pg_ctl 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$pg_ctl" ] && ! command -v pg_ctl >/dev/null; then
    echo "setup_postgres: installing postgresql from Debian ..."
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    pg_ctl=$(ls /usr/lib/postgresql/*/bin/pg_ctl | sort -V | tail -n 1)
    # The package's own cluster is not used: stop it so it holds no port or memory.
    command -v pg_ctlcluster >/dev/null && service postgresql stop >/dev/null 2>&1 || true
fi
python3 -c 'import psycopg, pytest_postgresql' 2>/dev/null || {
    echo "setup_postgres: psycopg or pytest-postgresql is missing; pip install -e '.[dev]' first" >&2
    exit 1
}
echo "setup_postgres: $("${pg_ctl:-pg_ctl}" --version) at ${pg_ctl:-$(command -v pg_ctl)}"
