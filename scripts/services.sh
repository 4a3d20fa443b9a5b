#!/usr/bin/env bash
# Install the server binaries the integration tests start on loopback, when missing (Debian/Ubuntu, as root):
# PostgreSQL's initdb/pg_ctl (package postgresql, which also creates the unprivileged `postgres` account the tests
# run the server as when they run as root). The S3-compatible server (moto) is a Python test dependency.
# The tests skip, naming what is missing, when this has not been run.
set -euo pipefail

have_postgres() {
    command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1 && return 0
    compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
}

if have_postgres; then
    echo "PostgreSQL server binaries present"
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "PostgreSQL server binaries missing: install the postgresql package (needs root and apt-get)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends postgresql >/dev/null
# The package may start a default cluster on port 5432; the tests use their own cluster on a free port.
echo "installed: $(compgen -G '/usr/lib/postgresql/*/bin/initdb' | head -1)"
