#!/usr/bin/env bash
# Makes sure a RabbitMQ broker answers AMQP 0-9-1 on 127.0.0.1:5672, for
# nubo's AMQP bus ([bus] transport = amqp) and its unit tests. There is no
# systemd here: rabbitmq-server is started in the background (as the rabbitmq
# user, through Debian's wrapper) and logs under /var/log/rabbitmq. Idempotent
# and quick when the broker already answers: the check is an AMQP protocol
# handshake on the port (the broker sends connection.start), not an Erlang CLI
# call. Waits up to RABBITMQ_WAIT seconds (default 60) for a cold start; exit
# status 0 once AMQP answers. Installs nothing (scripts/install-deps.sh does).
#
# Usage: scripts/rabbitmq-up.sh [VHOST...]   also creates each missing vhost,
# with all permissions for guest (e.g. one per test cloud, so clouds running
# side by side do not share the "conductor" queue); rabbitmqctl takes ~2 s a
# call, so this is only done for vhosts that do not exist yet.
set -uo pipefail
export PATH=$PATH:/usr/sbin:/sbin
host=${RABBITMQ_HOST:-127.0.0.1}
port=${RABBITMQ_PORT:-5672}
wait_s=${RABBITMQ_WAIT:-60}
logdir=/var/log/rabbitmq

log() { printf 'rabbitmq-up: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# True when something on host:port answers the AMQP 0-9-1 header with a
# method frame (type 1: connection.start).
amqp_answers() {
  timeout 2 bash -c '
    exec 3<>"/dev/tcp/$0/$1" || exit 1
    printf "AMQP\x00\x00\x09\x01" >&3
    b=$(head -c 1 <&3 | od -An -tu1 | tr -d " ")
    exec 3>&-
    [ "$b" = 1 ]' "$host" "$port" 2>/dev/null
}

how_to_reach() {
  log "RabbitMQ answers AMQP on $host:$port (logs: $logdir)"
  log "  nubo.conf: [bus] transport = amqp, transport_url = rabbit://guest:guest@$host:$port/"
  log "  inspect:   rabbitmqctl list_queues name messages consumers; rabbitmqctl list_exchanges"
}

ensure_vhosts() {
  (($#)) || return 0
  local have v
  have=$(rabbitmqctl -q list_vhosts 2>/dev/null) || die "rabbitmqctl list_vhosts failed"
  for v in "$@"; do
    grep -qxF -- "$v" <<<"$have" && continue
    log "creating vhost $v"
    rabbitmqctl -q add_vhost "$v" >/dev/null &&
      rabbitmqctl -q set_permissions -p "$v" guest '.*' '.*' '.*' >/dev/null ||
      die "cannot create vhost $v"
  done
}

if amqp_answers; then
  ensure_vhosts "$@"
  how_to_reach
  exit 0
fi
command -v rabbitmq-server >/dev/null || die "no rabbitmq-server (run scripts/install-deps.sh)"
mkdir -p "$logdir" && chown rabbitmq:rabbitmq "$logdir" 2>/dev/null
# A node that is still booting does not answer AMQP yet: only start one when
# no Erlang VM runs the rabbit application (checked with pgrep, not with
# `rabbitmq-diagnostics ping`, which itself boots a VM and takes a second).
if ! pgrep -u rabbitmq -f 'beam.* -s rabbit ' >/dev/null 2>&1; then
  log "starting rabbitmq-server (log: $logdir/startup_log)"
  start=$(date +%s%N)
  setsid nohup rabbitmq-server >/dev/null 2>&1 </dev/null &
else
  log "rabbitmq-server is starting; waiting for AMQP on $host:$port"
  start=$(date +%s%N)
fi
for ((i = 0; i < wait_s * 5; i++)); do
  if amqp_answers; then
    ms=$((($(date +%s%N) - start) / 1000000))
    log "up after $((ms / 1000)).$(printf '%03d' $((ms % 1000)))s"
    ensure_vhosts "$@"
    how_to_reach
    exit 0
  fi
  sleep 0.2
done
tail -20 "$logdir/startup_err" "$logdir/startup_log" 2>/dev/null >&2
die "RabbitMQ does not answer AMQP on $host:$port after ${wait_s}s (see $logdir)"
