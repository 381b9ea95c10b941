#!/usr/bin/env bash
# README command 1: installs what is missing, builds nubo and the test guest
# image (tests/images/build.sh), makes sure libvirtd runs
# (scripts/libvirt-up.sh), starts an all-in-one cloud in the background with
# the libvirt driver and that image as its `cirros` image, and boots a demo
# server from it (a real QEMU guest). Exits non-zero, with the server's
# fault, when the demo server does not become ACTIVE.
#
# Run again on the same machine, it keeps the cloud: the all-in-one is
# restarted on its state directory (config, passwords, servers kept; see
# `nubo aio --help`) and an existing `demo` server is reused if ACTIVE,
# started if SHUTOFF, and reported (with its fault, exit 1) otherwise.
#   NUBO_STATE (default /var/lib/nubo-aio), NUBO_PORT (default 8774),
#   NUBO_ADMIN_PASSWORD (first run: default generated and printed; later
#     runs: leave it unset, or give the cloud's current one),
#   NUBO_DRIVER (default libvirt; fake simulates the hypervisor),
#   NUBO_DEMO_IMAGE (default: the test guest, built here; else that file).
set -euo pipefail
cd "$(dirname "$0")/.."
state=${NUBO_STATE:-/var/lib/nubo-aio}
port=${NUBO_PORT:-8774}
driver=${NUBO_DRIVER:-libvirt}
image=${NUBO_DEMO_IMAGE:-tests/images/out/guest.qcow2}
bash scripts/install-deps.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
[ -n "${NUBO_DEMO_IMAGE:-}" ] || bash tests/images/build.sh "$(dirname "$image")"
[ "$driver" != libvirt ] || bash scripts/libvirt-up.sh

pidfile=$state/nubo.pid
if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
  pid=$(cat "$pidfile")
  echo "stopping the running all-in-one (pid $pid); it restarts with its cloud kept"
  kill "$pid"
  for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "setup.sh: the all-in-one (pid $pid) did not stop within 30 s" >&2
    exit 1
  fi
fi
mkdir -p -m 0755 "$state"   # QEMU (user libvirt-qemu) opens the disks under it
password_note="in $state/clouds.yaml (cloud nubo)"
if [ ! -f "$state/clouds.yaml" ] && [ -z "${NUBO_ADMIN_PASSWORD:-}" ]; then
  NUBO_ADMIN_PASSWORD=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
  password_note=$NUBO_ADMIN_PASSWORD
fi
[ -z "${NUBO_ADMIN_PASSWORD:-}" ] || export NUBO_ADMIN_PASSWORD
nohup ./build/nubo aio --state-dir "$state" --port "$port" --driver "$driver" \
  --demo-image "$image" >"$state/aio.out" 2>&1 &
echo $! >"$pidfile"
for _ in $(seq 300); do
  grep -q "nubo: ready" "$state/aio.out" 2>/dev/null && break
  kill -0 "$(cat "$pidfile")" 2>/dev/null || { cat "$state/aio.out"; exit 1; }
  sleep 0.1
done
grep -q "nubo: ready" "$state/aio.out" || { cat "$state/aio.out"; echo "setup.sh: nubo is not ready after 30 s" >&2; exit 1; }
grep "^nubo: config" "$state/aio.out"
export OS_CLIENT_CONFIG_FILE=$state/clouds.yaml
export PATH=/usr/bin:$PATH

# The demo server's status, polled until it leaves BUILD/REBOOT (10 min).
settle() {
  local st
  for _ in $(seq 300); do
    st=$(openstack --os-cloud nubo-demo server show "$1" -f value -c status)
    case $st in BUILD|REBOOT|HARD_REBOOT) sleep 2 ;; *) echo "$st"; return ;; esac
  done
  echo "$st"
}
# Prints the server's status and fault (as admin: the fault's details) and fails.
fail() {
  echo "setup.sh: the demo server $1 is $2, not ACTIVE:" >&2
  openstack --os-cloud nubo server show "$1" -f json -c id -c status -c fault >&2 || true
  echo "logs: $state/log/ (grep $1); $PWD/build/nubo status --config $state/nubo.conf" >&2
  exit 1
}
found=$(openstack --os-cloud nubo-demo server list --name '^demo$' -f value -c ID -c Status)
ids=$(printf '%s\n' "$found" | awk 'NF { print $1 }')
status=
case $(printf '%s' "$ids" | grep -c .) in
  0)
    # `--wait` exits 0 even after "Error creating server": the status decides
    id=$(openstack --os-cloud nubo-demo server create --flavor m1.tiny --image cirros demo \
           -f value -c id)
    echo "demo server $id created"
    ;;
  1)
    id=$ids
    status=$(printf '%s\n' "$found" | awk 'NF { print $2 }')
    echo "reusing the existing demo server $id ($status)"
    ;;
  *)
    echo "setup.sh: several servers are named demo in project demo: $(echo $ids); delete the" \
         "extra ones (openstack --os-cloud nubo-demo server delete ID)" >&2
    exit 1
    ;;
esac
[ "$status" = ACTIVE ] || status=$(settle "$id")
if [ "$status" = SHUTOFF ]; then
  echo "starting the demo server $id (SHUTOFF)"
  openstack --os-cloud nubo-demo server start "$id"
  for _ in $(seq 150); do
    status=$(openstack --os-cloud nubo-demo server show "$id" -f value -c status)
    [ "$status" = SHUTOFF ] || break
    sleep 2
  done
  status=$(settle "$id")
fi
[ "$status" = ACTIVE ] || fail "$id" "$status"
echo "demo server $id ACTIVE"
cat <<MSG

nubo is running (pid $(cat "$pidfile"), driver $driver, logs in $state/log/).
  export OS_CLIENT_CONFIG_FILE=$state/clouds.yaml
  openstack --os-cloud nubo server list --all-projects      # admin (password: $password_note)
  openstack --os-cloud nubo-demo server list                # demo member
  openstack --os-cloud nubo image show cirros               # the demo image, $image
  $PWD/build/nubo status --config $state/nubo.conf   # every role and agent, up or down
Stop it with: kill \$(cat $pidfile); run this script again to restart it (the cloud is kept).
MSG
