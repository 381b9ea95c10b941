#!/usr/bin/env bash
# README command 1: installs what is missing, builds nubo and the test guest
# image (tests/images/build.sh), makes sure libvirtd runs
# (scripts/libvirt-up.sh), starts an all-in-one cloud in the background with
# the libvirt driver and that image as its `cirros` image, and boots a demo
# server from it (a real QEMU guest).
#   NUBO_STATE (default /var/lib/nubo-aio), NUBO_PORT (default 8774),
#   NUBO_ADMIN_PASSWORD (default: generated and printed),
#   NUBO_DRIVER (default libvirt; fake simulates the hypervisor).
set -euo pipefail
cd "$(dirname "$0")/.."
state=${NUBO_STATE:-/var/lib/nubo-aio}
port=${NUBO_PORT:-8774}
driver=${NUBO_DRIVER:-libvirt}
image=tests/images/out/guest.qcow2
bash scripts/install-deps.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
bash tests/images/build.sh "$(dirname "$image")"
[ "$driver" != libvirt ] || bash scripts/libvirt-up.sh
if [ -f "$state/nubo.pid" ] && kill -0 "$(cat "$state/nubo.pid")" 2>/dev/null; then
  echo "stopping the running all-in-one (pid $(cat "$state/nubo.pid"))"
  kill "$(cat "$state/nubo.pid")"; sleep 1
fi
mkdir -p -m 0755 "$state"   # QEMU (user libvirt-qemu) opens the disks under it
: "${NUBO_ADMIN_PASSWORD:=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')}"
export NUBO_ADMIN_PASSWORD
nohup ./build/nubo aio --state-dir "$state" --port "$port" --driver "$driver" \
  --demo-image "$image" >"$state/aio.out" 2>&1 &
echo $! >"$state/nubo.pid"
for _ in $(seq 300); do
  grep -q "nubo: ready" "$state/aio.out" 2>/dev/null && break
  kill -0 "$(cat "$state/nubo.pid")" 2>/dev/null || { cat "$state/aio.out"; exit 1; }
  sleep 0.1
done
export OS_CLIENT_CONFIG_FILE=$state/clouds.yaml
export PATH=/usr/bin:$PATH
openstack --os-cloud nubo-demo server create --flavor m1.tiny --image cirros --wait demo -f value -c id -c status
cat <<MSG

nubo is running (pid $(cat "$state/nubo.pid"), driver $driver, logs in $state/log/).
  export OS_CLIENT_CONFIG_FILE=$state/clouds.yaml
  openstack --os-cloud nubo server list --all-projects      # admin (password: $NUBO_ADMIN_PASSWORD)
  openstack --os-cloud nubo-demo server list                # demo member
  openstack --os-cloud nubo image show cirros               # the test guest, $image
Stop it with: kill \$(cat $state/nubo.pid)
MSG
