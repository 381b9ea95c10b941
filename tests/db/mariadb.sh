#!/usr/bin/env bash
# A throwaway MariaDB server for tests, without systemd: datadir, socket,
# pid and log under $NUBO_MARIA_DIR (default /var/tmp/nubo-maria), TCP on
# 127.0.0.1:$NUBO_MARIA_PORT (default 3307), root by the unix socket only.
#
#   bash tests/db/mariadb.sh start        install (apt, via scripts/install-deps.sh
#                                         NUBO_WITH_MARIADB=1) if missing, initialise
#                                         the datadir once, start, wait until ready
#   bash tests/db/mariadb.sh createdb DB [USER PASSWORD]
#                                         a fresh (dropped and recreated) database
#                                         and a user with all rights on it; prints
#                                         its mysql+pymysql:// URL
#   bash tests/db/mariadb.sh client [ARGS] the mariadb client as root
#   bash tests/db/mariadb.sh stop          stops the server (datadir kept)
#   bash tests/db/mariadb.sh teardown      stops it and removes $NUBO_MARIA_DIR
# Every command is idempotent.
# For tests/db/galera.sh, which runs its nodes with this script:
#   NUBO_MARIA_CNF      an options file ([mariadbd] group) read instead of none
#                       (--defaults-file: Galera's SST scripts read it too)
#   NUBO_MARIA_ARGS     more mariadbd arguments for this start (--wsrep-new-cluster)
#   NUBO_MARIA_WAIT     seconds to wait for the server (default 30; a joiner's SST)
#   NUBO_MARIA_USER     the user mariadbd runs as (default: the caller; Galera's
#                       rsync SST daemon, started as root, would switch to nobody)
set -euo pipefail
dir=${NUBO_MARIA_DIR:-/var/tmp/nubo-maria}
port=${NUBO_MARIA_PORT:-3307}
case "$dir" in /var/tmp/nubo-maria*) ;; *) echo "NUBO_MARIA_DIR must be under /var/tmp/nubo-maria*" >&2; exit 2 ;; esac
sock=$dir/mysqld.sock
pidfile=$dir/mysqld.pid
here=$(cd "$(dirname "$0")/../.." && pwd)
defaults=--no-defaults
[ -z "${NUBO_MARIA_CNF:-}" ] || defaults=--defaults-file=$NUBO_MARIA_CNF
read -r -a more <<<"${NUBO_MARIA_ARGS:-}"
wait_s=${NUBO_MARIA_WAIT:-30}
user=${NUBO_MARIA_USER:-$(id -un)}

client() { mariadb --no-defaults -uroot --socket="$sock" "$@"; }

running() { [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

start() {
  command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || NUBO_WITH_MARIADB=1 bash "$here/scripts/install-deps.sh"
  if running; then return 0; fi
  mkdir -p "$dir"
  [ "$user" = "$(id -un)" ] || chown "$user:" "$dir"
  if [ ! -d "$dir/data/mysql" ]; then
    mariadb-install-db --no-defaults --auth-root-authentication-method=socket \
      --user="$user" --datadir="$dir/data" --skip-test-db >"$dir/install.log" 2>&1 ||
      { cat "$dir/install.log" >&2; exit 1; }
  fi
  # innodb_flush_log_at_trx_commit=2 and no doublewrite: a test server, not a durable one
  /usr/sbin/mariadbd "$defaults" --user="$user" --datadir="$dir/data" --socket="$sock" \
    --pid-file="$pidfile" --log-error="$dir/error.log" --bind-address=127.0.0.1 --port="$port" \
    --skip-name-resolve --innodb-buffer-pool-size=128M --innodb-flush-log-at-trx-commit=2 \
    --innodb-doublewrite=0 --max-connections=500 --character-set-server=utf8mb4 \
    --collation-server=utf8mb4_general_ci "${more[@]}" >/dev/null 2>&1 &
  for _ in $(seq 1 $((wait_s * 5))); do
    if client -e 'SELECT 1' >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  echo "mariadbd did not become ready; $dir/error.log:" >&2
  tail -20 "$dir/error.log" >&2 || true
  exit 1
}

createdb() {
  local db=$1 user=${2:-$1} pw=${3:-nubo-test}
  [[ $db =~ ^[A-Za-z0-9_]+$ && $user =~ ^[A-Za-z0-9_]+$ && $pw =~ ^[A-Za-z0-9_.-]+$ ]] ||
    { echo "createdb: names are [A-Za-z0-9_], the password [A-Za-z0-9_.-]" >&2; exit 2; }
  client -e "DROP DATABASE IF EXISTS \`$db\`; CREATE DATABASE \`$db\` CHARACTER SET utf8mb4;
    CREATE USER IF NOT EXISTS '$user'@'127.0.0.1' IDENTIFIED BY '$pw';
    CREATE USER IF NOT EXISTS '$user'@'localhost' IDENTIFIED BY '$pw';
    GRANT ALL ON \`$db\`.* TO '$user'@'127.0.0.1'; GRANT ALL ON \`$db\`.* TO '$user'@'localhost';"
  echo "mysql+pymysql://$user:$pw@127.0.0.1:$port/$db?charset=utf8"
}

stop() {
  running || { rm -f "$pidfile"; return 0; }
  local pid
  pid=$(cat "$pidfile")
  kill "$pid"
  for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  echo "mariadbd $pid did not stop" >&2
  exit 1
}

cmd=${1:-}
shift || true
case "$cmd" in
  start) start ;;
  createdb) [ $# -ge 1 ] || { echo "usage: $0 createdb DB [USER PASSWORD]" >&2; exit 2; }; createdb "$@" ;;
  client) client "$@" ;;
  stop) stop ;;
  teardown) stop; rm -rf "$dir" ;;
  *) echo "usage: $0 start|createdb DB [USER PASSWORD]|client [ARGS]|stop|teardown" >&2; exit 2 ;;
esac
