#!/usr/bin/env bash
# Starts a throwaway PostgreSQL for the zone store's tests (orc-zone-store), listening on
# 127.0.0.1 only, and prints the line that points the tests at it:
#
#   eval "$(crates/zone/scripts/start-test-postgres.sh)"
#   cargo nextest run -p orc-zone-store
#
# Everything but that `export ORC_TEST_POSTGRES_URL=…` line goes to stderr.
#
# As root: installs the Debian `postgresql` package if it is missing and runs a dedicated
# cluster `orc-test` (pg_createcluster/pg_ctlcluster) so the machine's own cluster is left
# alone. As another user: runs `initdb`/`pg_ctl` in a directory under $TMPDIR.
#
# The role `orc_test` (password `orc_test`, CREATEDB) and database `orc_test` exist only on
# this loopback cluster; each test creates and drops its own database through them.
# Port: $ORC_TEST_POSTGRES_PORT, default 54329. Safe to run again: reuses what is there.
set -euo pipefail

port="${ORC_TEST_POSTGRES_PORT:-54329}"
role=orc_test
password=orc_test
database=orc_test

log() { echo "start-test-postgres: $*" >&2; }

pg_version() {
    ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1
}

if [ -z "$(pg_version)" ]; then
    if [ "$(id -u)" -eq 0 ]; then
        log "installing postgresql"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        apt-get install -y -qq postgresql >&2
    else
        log "PostgreSQL is not installed; install the postgresql package (as root) first"
        exit 1
    fi
fi
version="$(pg_version)"
bin="/usr/lib/postgresql/$version/bin"

sql_admin() {
    # Runs SQL as the cluster's superuser over its Unix socket.
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -p "$port" -d postgres -c "$1" >&2
    else
        psql -X -q -v ON_ERROR_STOP=1 -h "$socket_dir" -p "$port" -d postgres -c "$1" >&2
    fi
}

if [ "$(id -u)" -eq 0 ]; then
    cluster=orc-test
    if ! pg_lsclusters -h | awk '{print $1" "$2}' | grep -qx "$version $cluster"; then
        log "creating cluster $version/$cluster on port $port"
        pg_createcluster "$version" "$cluster" -p "$port" >&2
        # Debian's postgresql.conf includes conf.d/; settings here override it.
        cat >"/etc/postgresql/$version/$cluster/conf.d/orc-test.conf" <<EOF
listen_addresses = '127.0.0.1'
fsync = off
max_connections = 200
EOF
    fi
    if ! pg_lsclusters -h | awk '$1" "$2=="'"$version $cluster"'" {print $4}' | grep -qx online; then
        log "starting cluster $version/$cluster"
        pg_ctlcluster "$version" "$cluster" start >&2
    fi
else
    data_dir="${TMPDIR:-/tmp}/orc-test-postgres-$(id -u)"
    socket_dir="$data_dir/socket"
    if [ ! -f "$data_dir/PG_VERSION" ]; then
        log "initialising $data_dir"
        mkdir -p "$data_dir"
        "$bin/initdb" -D "$data_dir" -A trust -U "$(id -un)" >&2
        mkdir -p "$socket_dir"
    fi
    if ! "$bin/pg_ctl" -D "$data_dir" status >/dev/null 2>&1; then
        log "starting PostgreSQL in $data_dir"
        "$bin/pg_ctl" -D "$data_dir" -l "$data_dir/log" -w start \
            -o "-p $port -k $socket_dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" >&2
    fi
fi

for _ in $(seq 1 50); do
    if "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; then
        break
    fi
    sleep 0.2
done
"$bin/pg_isready" -q -h 127.0.0.1 -p "$port" || { log "PostgreSQL did not come up on port $port"; exit 1; }

sql_admin "DO \$\$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$role') THEN
        CREATE ROLE $role LOGIN CREATEDB PASSWORD '$password';
    END IF;
END \$\$;"
exists=$(
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- psql -X -tA -p "$port" -d postgres \
            -c "SELECT 1 FROM pg_database WHERE datname = '$database'"
    else
        psql -X -tA -h "$socket_dir" -p "$port" -d postgres \
            -c "SELECT 1 FROM pg_database WHERE datname = '$database'"
    fi
)
if [ "$exists" != "1" ]; then
    sql_admin "CREATE DATABASE $database OWNER $role"
fi

log "ready on 127.0.0.1:$port"
echo "export ORC_TEST_POSTGRES_URL=postgres://$role:$password@127.0.0.1:$port/$database"
