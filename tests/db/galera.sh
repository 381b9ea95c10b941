#!/usr/bin/env bash
# A throwaway Galera cluster of three mariadbd (Debian galera-4) on
# 127.0.0.1 for the fault tests, without systemd, and an HAProxy in front of
# it as OpenStack deployments put one (OpenStack-Ansible, Kolla): TCP mode,
# node 1 active and nodes 2 and 3 `backup`, a node counted up only while it
# is Synced. Each node is a tests/db/mariadb.sh server with its own
# directory $NUBO_GALERA_DIR/nN (default /var/tmp/nubo-maria-galera/nN) and
# an options file there with its wsrep settings.
#
# Ports (base $NUBO_GALERA_PORT, default 3320; node N = 1..3):
#   SQL 3320+N, group communication 4570+N, IST 4580+N, rsync SST 4590+N,
#   the front (HAProxy) 3320 itself, HAProxy's stats socket in the dir.
#
#   bash tests/db/galera.sh start       install if missing (install-deps.sh with
#                                       NUBO_WITH_MARIADB=1), bootstrap node 1
#                                       (--wsrep-new-cluster) or rejoin it, join
#                                       the others (SST by rsync), start the front;
#                                       waits until wsrep_cluster_size=3 and every
#                                       node is Synced
#   bash tests/db/galera.sh createdb DB [USER PASSWORD]
#                                       as mariadb.sh's, on the cluster; prints
#                                       the URL through the front
#   bash tests/db/galera.sh kill N      kill -9 of node N
#   bash tests/db/galera.sh restart N   starts node N again (it rejoins: IST or
#                                       SST) and waits until it is Synced
#   bash tests/db/galera.sh status      one line per node: running, size, state
#   bash tests/db/galera.sh client N [ARGS]   the mariadb client as root on node N
#   bash tests/db/galera.sh teardown    stops the front and the nodes, removes the dir
# Every command is idempotent.
set -euo pipefail
base=${NUBO_GALERA_DIR:-/var/tmp/nubo-maria-galera}
port0=${NUBO_GALERA_PORT:-3320}
case "$base" in /var/tmp/nubo-maria-galera*) ;; *) echo "NUBO_GALERA_DIR must be under /var/tmp/nubo-maria-galera*" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")/../.." && pwd)
maria=$here/tests/db/mariadb.sh
gport() { echo $((port0 + 1250 + $1)); } # 3320 -> 4571..4573
peers="gcomm://127.0.0.1:$(gport 1),127.0.0.1:$(gport 2),127.0.0.1:$(gport 3)"

# mariadb.sh on node N: node N [ARGS...]
node() {
  local n=$1
  shift
  NUBO_MARIA_DIR=$base/n$n NUBO_MARIA_PORT=$((port0 + n)) NUBO_MARIA_CNF=$base/n$n.cnf NUBO_MARIA_USER=mysql \
    bash "$maria" "$@"
}

running() { local p=$base/n$1/mysqld.pid; [ -s "$p" ] && kill -0 "$(cat "$p")" 2>/dev/null; }

# Node N's value of status variable $2 ('' when it does not answer).
status_var() {
  node "$1" client -N -B -e "SHOW GLOBAL STATUS LIKE '$2'" 2>/dev/null | cut -f2 || true
}

cnf() {
  local n=$1
  mkdir -p "$base/n$n"
  # gcache and timeouts small: a test cluster on one machine; a killed node is
  # declared gone after ~3 s instead of Galera's default 5-15 s
  cat >"$base/n$n.cnf" <<EOF
[mariadbd]
wsrep_on = ON
wsrep_provider = /usr/lib/galera/libgalera_smm.so
wsrep_cluster_name = nubo-galera
wsrep_cluster_address = $peers
wsrep_node_name = n$n
wsrep_node_address = 127.0.0.1:$(gport "$n")
wsrep_node_incoming_address = 127.0.0.1:$((port0 + n))
wsrep_sst_method = rsync
wsrep_sst_receive_address = 127.0.0.1:$((port0 + 1270 + n))
wsrep_provider_options = "gmcast.listen_addr=tcp://127.0.0.1:$(gport "$n"); ist.recv_addr=127.0.0.1:$((port0 + 1260 + n)); gcache.size=64M; evs.suspect_timeout=PT3S; evs.inactive_timeout=PT6S; evs.install_timeout=PT6S; evs.keepalive_period=PT1S"
wsrep_slave_threads = 2
binlog_format = ROW
default_storage_engine = InnoDB
innodb_autoinc_lock_mode = 2
# nubo's migrations create triggers; Galera replicates like a binary log
log_bin_trust_function_creators = 1
EOF
}

# Waits until node N is Synced in a cluster of 3 (up to $2 seconds).
wait_synced() {
  local n=$1 t=${2:-60} size state
  for _ in $(seq 1 $((t * 5))); do
    size=$(status_var "$n" wsrep_cluster_size)
    state=$(status_var "$n" wsrep_local_state_comment)
    [ "$size" = 3 ] && [ "$state" = Synced ] && return 0
    sleep 0.2
  done
  echo "galera node $n not Synced in a cluster of 3 after ${t}s (size '$size', state '$state'); $base/n$n/error.log:" >&2
  tail -30 "$base/n$n/error.log" >&2 || true
  return 1
}

# Starts node N if it is not running: bootstrap when no other node runs.
start_node() {
  local n=$1 args=""
  running "$n" && return 0
  cnf "$n"
  local others=0
  for m in 1 2 3; do [ "$m" != "$n" ] && running "$m" && others=1; done
  if [ $others = 0 ]; then
    args=--wsrep-new-cluster
    # a whole-cluster restart: this node's data is the cluster's (a throwaway)
    [ ! -f "$base/n$n/data/grastate.dat" ] ||
      sed -i 's/^safe_to_bootstrap: 0/safe_to_bootstrap: 1/' "$base/n$n/data/grastate.dat"
  fi
  # a joiner answers SQL only after its state transfer
  NUBO_MARIA_ARGS=$args NUBO_MARIA_WAIT=90 node "$n" start
}

front() {
  local cfg=$base/haproxy.cfg check=$base/check-synced.sh
  if [ -s "$base/haproxy.pid" ] && kill -0 "$(cat "$base/haproxy.pid")" 2>/dev/null; then return 0; fi
  # haproxy runs it with the server's address and port last; the socket is node N's
  cat >"$check" <<EOF
#!/bin/sh
n=\$((\$4 - $port0))
exec 2>/dev/null
[ "\$(mariadb --no-defaults -uroot --socket=$base/n\$n/mysqld.sock -N -B -e "SHOW GLOBAL STATUS LIKE 'wsrep_local_state'" | cut -f2)" = 4 ]
EOF
  chmod +x "$check"
  # as OpenStack-Ansible and Kolla: one writer; the backups take over when it
  # is down (its sessions cut), and give back when it is Synced again
  # (theirs cut, so that one node alone takes writes)
  cat >"$cfg" <<EOF
global
  maxconn 2000
  external-check
  insecure-fork-wanted
  stats socket $base/haproxy.sock mode 600
defaults
  mode tcp
  timeout connect 2s
  timeout client 1h
  timeout server 1h
  retries 2
  option redispatch
listen galera
  bind 127.0.0.1:$port0
  option external-check
  external-check path "/usr/bin:/bin"
  external-check command $check
  # a refused connection marks the server down at once, not after two checks
  default-server inter 500ms rise 2 fall 2 on-marked-down shutdown-sessions observe layer4 error-limit 1 on-error mark-down
  server n1 127.0.0.1:$((port0 + 1)) check on-marked-up shutdown-backup-sessions
  server n2 127.0.0.1:$((port0 + 2)) check backup
  server n3 127.0.0.1:$((port0 + 3)) check backup
EOF
  haproxy -q -f "$cfg" -D -p "$base/haproxy.pid"
}

start() {
  if ! command -v haproxy >/dev/null || ! command -v rsync >/dev/null ||
    [ ! -e /usr/lib/galera/libgalera_smm.so ]; then
    NUBO_WITH_MARIADB=1 bash "$here/scripts/install-deps.sh"
  fi
  mkdir -p "$base"
  # node 1 first: it bootstraps unless another node is running
  for n in 1 2 3; do start_node "$n"; done
  for n in 1 2 3; do wait_synced "$n" 60; done
  front
}

createdb() {
  local n
  for n in 1 2 3; do running "$n" && break; done
  node "$n" createdb "$@" >/dev/null
  # DDL replicates in total order: every node has the database and the users
  local db=$1 user=${2:-$1} pw=${3:-nubo-test}
  echo "mysql+pymysql://$user:$pw@127.0.0.1:$port0/$db?charset=utf8"
}

kill_node() {
  running "$1" || return 0
  kill -9 "$(cat "$base/n$1/mysqld.pid")"
  for _ in $(seq 1 50); do running "$1" || return 0; sleep 0.1; done
}

restart_node() {
  start_node "$1"
  wait_synced "$1" 90
}

status() {
  local n
  for n in 1 2 3; do
    if running "$n"; then
      echo "n$n running size=$(status_var "$n" wsrep_cluster_size) state=$(status_var "$n" wsrep_local_state_comment) port=$((port0 + n))"
    else
      echo "n$n down port=$((port0 + n))"
    fi
  done
}

teardown() {
  if [ -s "$base/haproxy.pid" ]; then
    kill "$(cat "$base/haproxy.pid")" 2>/dev/null || true
  fi
  # the backups first, so that node 1 leaves last (and could bootstrap again)
  for n in 3 2 1; do [ -d "$base/n$n" ] && node "$n" stop; done
  rm -rf "$base"
}

check_n() { [[ ${1:-} =~ ^[123]$ ]] || { echo "node number 1, 2 or 3" >&2; exit 2; }; }

cmd=${1:-}
shift || true
case "$cmd" in
  start) start ;;
  createdb) [ $# -ge 1 ] || { echo "usage: $0 createdb DB [USER PASSWORD]" >&2; exit 2; }; createdb "$@" ;;
  kill) check_n "${1:-}"; kill_node "$1" ;;
  restart) check_n "${1:-}"; restart_node "$1" ;;
  status) status ;;
  client) check_n "${1:-}"; n=$1; shift; node "$n" client "$@" ;;
  teardown) teardown ;;
  *) echo "usage: $0 start|createdb DB [USER PASSWORD]|kill N|restart N|status|client N [ARGS]|teardown" >&2; exit 2 ;;
esac
