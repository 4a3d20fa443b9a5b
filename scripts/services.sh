#!/usr/bin/env bash
# Install the server binaries the integration tests and `eval-pipeline bench --executor celery` start on loopback,
# when missing (Debian/Ubuntu, as root): PostgreSQL's initdb/pg_ctl (package postgresql, which also creates the
# unprivileged `postgres` account the tests run the server as when they run as root) and redis-server (the Celery
# broker). The S3-compatible server (moto) and the Celery workers are Python test dependencies.
# The tests skip, naming what is missing, when this has not been run.
set -euo pipefail

have_postgres() {
    command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1 && return 0
    compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
}

missing=()
have_postgres || missing+=(postgresql)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)

if [ ${#missing[@]} -eq 0 ]; then
    echo "PostgreSQL and Redis server binaries present"
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "server binaries missing: install the package(s) ${missing[*]} (needs root and apt-get)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The packages may start default servers on ports 5432 and 6379; the tests start their own on free ports.
echo "installed: ${missing[*]}"
