#!/usr/bin/env bash
# README command 1: installs what is missing, builds nubo, starts an
# all-in-one cloud in the background and boots a demo server.
#   NUBO_STATE (default /var/lib/nubo-aio), NUBO_PORT (default 8774),
#   NUBO_ADMIN_PASSWORD (default: generated and printed).
set -euo pipefail
cd "$(dirname "$0")/.."
state=${NUBO_STATE:-/var/lib/nubo-aio}
port=${NUBO_PORT:-8774}
bash scripts/install-deps.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
if [ -f "$state/nubo.pid" ] && kill -0 "$(cat "$state/nubo.pid")" 2>/dev/null; then
  echo "stopping the running all-in-one (pid $(cat "$state/nubo.pid"))"
  kill "$(cat "$state/nubo.pid")"; sleep 1
fi
mkdir -p "$state"
: "${NUBO_ADMIN_PASSWORD:=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')}"
export NUBO_ADMIN_PASSWORD
nohup ./build/nubo aio --state-dir "$state" --port "$port" >"$state/aio.out" 2>&1 &
echo $! >"$state/nubo.pid"
for _ in $(seq 100); do
  grep -q "nubo: ready" "$state/aio.out" 2>/dev/null && break
  kill -0 "$(cat "$state/nubo.pid")" 2>/dev/null || { cat "$state/aio.out"; exit 1; }
  sleep 0.1
done
export OS_CLIENT_CONFIG_FILE=$state/clouds.yaml
export PATH=/usr/bin:$PATH
openstack --os-cloud nubo-demo server create --flavor m1.tiny --image cirros --wait demo -f value -c id -c status
cat <<MSG

nubo is running (pid $(cat "$state/nubo.pid"), logs in $state/log/).
  export OS_CLIENT_CONFIG_FILE=$state/clouds.yaml
  openstack --os-cloud nubo server list --all-projects      # admin (password: $NUBO_ADMIN_PASSWORD)
  openstack --os-cloud nubo-demo server list                # demo member
Stop it with: kill \$(cat $state/nubo.pid)
MSG
