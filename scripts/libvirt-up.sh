#!/usr/bin/env bash
# Makes sure virtlogd and libvirtd run and that libvirtd answers on
# qemu:///system, for nubo's libvirt driver and the tests with real guests.
# There is no systemd here: the daemons are started with -d and found through
# their pidfiles (/run/virtlogd.pid, /run/libvirtd.pid). Idempotent: nothing
# is started when they already run. Installs nothing (scripts/install-deps.sh
# does). Waits up to LIBVIRT_WAIT seconds (default 30) for libvirtd to answer;
# exit status 0 once it does.
set -uo pipefail
export PATH=$PATH:/usr/sbin:/sbin
URI=qemu:///system
wait_s=${LIBVIRT_WAIT:-30}

log() { printf 'libvirt-up: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

for b in virtlogd libvirtd virsh; do
  command -v "$b" >/dev/null || die "no $b (run scripts/install-deps.sh)"
done
pid_alive() { local p; p=$(cat "$1" 2>/dev/null) && [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }
answers() { virsh -q -c "$URI" uri >/dev/null 2>&1; }

# libvirtd hands QEMU's output to virtlogd: start it first
if ! pid_alive /run/virtlogd.pid; then
  log "starting virtlogd"
  virtlogd -d || die "virtlogd -d failed"
fi
answers && exit 0
if ! pid_alive /run/libvirtd.pid; then
  log "starting libvirtd"
  libvirtd -d || die "libvirtd -d failed"
fi
for ((i = 0; i < wait_s * 10; i++)); do
  answers && exit 0
  sleep 0.1
done
die "libvirtd does not answer on $URI after ${wait_s}s"
