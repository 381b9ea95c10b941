#!/usr/bin/env bash
# Runs Tempest 33 (Debian) with the checked-in list against a fresh nubo
# all-in-one. usage: run.sh NUBO_BIN   (WS= workspace dir, CONCURRENCY=2)
# Writes $WS/results.subunit, results.xml (JUnit) and console.txt; exits
# non-zero when a listed test fails, errors or is skipped/not run.
# INCLUDE_LIST=FILE runs another list, TEMPEST_CONF_IN=FILE another config
# template (a helper trying new tests).
# ALL=compute (or network, volume, image): every test of tempest.api.<ALL>
# instead of a list, to find what passes now; prints the passed, failed and
# skipped counts, writes $WS/passed.txt, failed.txt and skipped.txt (ids as
# include-list.txt has them; failed.txt also names the classes whose set-up
# failed) and exits non-zero when a test failed.
# VALIDATION=1: the guest tests instead (include-list-guests.txt,
# tempest-guests.conf.in, run_validation = True): the all-in-one runs real
# QEMU (TCG) guests of the system libvirtd from the test image, built with
# curl into $WS/image (GUEST_CURL=1 tests/images/build.sh), and the
# network agent, with "public" = 10.161.0.0/24 whose gateway is on this
# host, so Tempest reaches the guests' floating IPs by SSH. What the agent
# wired (namespaces, dnsmasq, bridges, nft tables) and the guests are
# removed at the end.
set -uo pipefail
export PATH=/usr/sbin:/usr/bin:/sbin:/bin PYTHON=/usr/bin/python3
unset PYTHONPATH VIRTUAL_ENV
here=$(cd "$(dirname "$0")" && pwd)
bin=$(readlink -f "${1:?usage: run.sh NUBO_BIN}")
WS=$(readlink -m "${WS:-$here/work}")
conc=${CONCURRENCY:-2}
rm -rf "$WS" "$WS.workspace.yaml"; mkdir -p "$WS"
# a free port whose successor is free too: the metadata API listens on port + 1
port=$(/usr/bin/python3 - <<'PY'
import socket
while True:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port + 1))
        print(port)
        break
    except (OSError, OverflowError):
        continue
PY
)
pw=tempest-admin-secret
# snapshots take a second, as real ones take seconds: the image tests that
# act while an image is being saved need that window; the fake hosts keep
# their disks apart (no shared storage), so live migrations are block
# migrations and evacuations rebuild from the image
if [ "${VALIDATION:-0}" = 1 ]; then
  # the test guest with curl (Tempest's metadata checks run it), built into
  # the workspace: the e2e suite's guest stays without it (smaller, faster
  # to boot under TCG)
  GUEST_CURL=1 bash "$here/../images/build.sh" "$WS/image" >"$WS/image.log" 2>&1 ||
    { cat "$WS/image.log"; exit 1; }
  bash "$here/../../scripts/libvirt-up.sh" || exit 1
  qcow2=$WS/image/guest.qcow2
  # the scheduler's periodic power-state sync is left to libvirt's events
  NUBO_ADMIN_PASSWORD=$pw "$bin" aio --state-dir "$WS/state" --port "$port" \
    --driver libvirt --set libvirt.virt_type=qemu \
    --set network.seed_public_cidr=10.161.0.0/24 \
    --set compute.sync_power_state_interval=600 --set DEFAULT.shutdown_timeout=5 \
    --set agent.report_interval=5 >"$WS/aio.out" 2>&1 &
else
  NUBO_ADMIN_PASSWORD=$pw "$bin" aio --state-dir "$WS/state" --port "$port" \
    --set fake.snapshot_delay_ms=1000 --set fake.shared_storage=false >"$WS/aio.out" 2>&1 &
fi
aio=$!
cleanup() {
  kill $aio 2>/dev/null; wait $aio 2>/dev/null
  [ "${VALIDATION:-0}" = 1 ] || return 0
  # the guests, then what the network agent wired (it keeps the data plane
  # when nubo stops)
  for d in $(sqlite3 "$WS/state/nubo.sqlite" "SELECT uuid FROM instances" 2>/dev/null); do
    virsh -q destroy "$d" >/dev/null 2>&1; virsh -q undefine "$d" --managed-save >/dev/null 2>&1
  done
  (cd "$here/../e2e" && /usr/bin/python3 -c \
    'import sys, netagent_cleanup as n; n.remove_agent_leftovers(sys.argv[1])' "$WS/state")
}
trap cleanup EXIT
for _ in $(seq 200); do
  grep -q "nubo: ready" "$WS/aio.out" && break
  kill -0 $aio 2>/dev/null || { cat "$WS/aio.out"; exit 1; }
  sleep 0.1
done
export OS_CLIENT_CONFIG_FILE=$WS/state/clouds.yaml
osc() { /usr/bin/openstack --os-cloud nubo "$@"; }
# two public images with data (1 MiB raw): volumes can be made from them
# (the seeded cirros is a record without data), and image_ref_alt differs
# from image_ref, as the filter-by-image tests need
head -c 1048576 /dev/zero >"$WS/tempest-img.raw"
mkimg() {
  osc image create --public --disk-format raw --container-format bare \
    --file "$WS/tempest-img.raw" -f value -c id "$1"
}
if [ "${VALIDATION:-0}" = 1 ]; then
  # the test guest (with curl, 192 MiB leaves its initramfs room: m1.micro;
  # flavor_alt is the resize target)
  mkimg() {
    osc image create --public --disk-format qcow2 --container-format bare \
      --file "$qcow2" -f value -c id "$1"
  }
  image=$(mkimg tempest-guest-1) && image_alt=$(mkimg tempest-guest-2) || exit 1
  flavor=$(osc flavor show m1.micro -f value -c id)
  flavor_alt=$(osc flavor show m1.tiny -f value -c id)
  public_net=$(osc network show public -f value -c id) || exit 1
  TEMPEST_CONF_IN=${TEMPEST_CONF_IN:-$here/tempest-guests.conf.in}
  INCLUDE_LIST=${INCLUDE_LIST:-$here/include-list-guests.txt}
else
  image=$(mkimg tempest-img-1) && image_alt=$(mkimg tempest-img-2) || exit 1
  # two public flavors of different RAM, same disk (resize target)
  flavor=$(osc flavor show m1.nano -f value -c id)
  flavor_alt=$(osc flavor show m1.micro -f value -c id)
  # an external network for the router tests (public_network_id). aio does not
  # seed it; it lives in the service project because in the admin project it
  # would make admin boots without --nic ambiguous (Nova offers a project its
  # own networks plus the shared ones)
  public_net=$(osc network create --external --project service public -f value -c id) &&
    osc subnet create --network public --subnet-range 172.24.4.0/24 public-subnet >/dev/null || exit 1
  # devstack's router1 joins "private" to it: the servers' floating IPs (os-floating-ips and
  # addFloatingIp tests) need a router from their subnet to the floating network
  osc router create router1 >/dev/null && osc router set --external-gateway public router1 &&
    osc router add subnet router1 private-subnet || exit 1
fi

/usr/bin/tempest init --workspace-path "$WS.workspace.yaml" --name nubo "$WS/tempest" >/dev/null
rm -f "$WS/tempest/etc/logging.conf"   # Debian's makes workers truncate one log
# The guest tests are scheduled by test, not by class: grouped by class, one
# worker had all six security group scenarios (4:56 against 2:15 on
# 2026-12-03; 5:19 in all ungrouped against ~6:15).
[ "${VALIDATION:-0}" = 1 ] && sed -i '/^group_regex/d' "$WS/tempest/.stestr.conf"
sed -e "s|@WS@|$WS/tempest|g" -e "s|@URL@|http://127.0.0.1:$port|g" \
    -e "s|@ADMIN_PASSWORD@|$pw|g" -e "s|@IMAGE_REF@|$image|g" \
    -e "s|@IMAGE_REF_ALT@|$image_alt|g" -e "s|@FLAVOR_REF@|$flavor|g" \
    -e "s|@FLAVOR_REF_ALT@|$flavor_alt|g" \
    -e "s|@PUBLIC_NETWORK_ID@|$public_net|g" "${TEMPEST_CONF_IN:-$here/tempest.conf.in}" >"$WS/tempest/etc/tempest.conf"
if [ -n "${ALL:-}" ]; then
  case $ALL in compute | network | volume | image) ;; *)
    echo "ALL=$ALL: compute, network, volume or image" >&2; exit 2 ;;
  esac
  select=(--regex "^tempest\.api\.$ALL\.")
else
  # anchor each listed id: --include-list entries are re.search regexes
  /usr/bin/python3 - "${INCLUDE_LIST:-$here/include-list.txt}" >"$WS/include-list.txt" <<'PY'
import re, sys
for line in open(sys.argv[1]):
    t = line.split('#', 1)[0].strip()
    if t:
        print('^' + re.escape(re.sub(r'\[.*$', '', t)) + r'(\[|$)')
PY
  expected=$(grep -c . "$WS/include-list.txt")
  select=(--include-list "$WS/include-list.txt")
fi
cd "$WS/tempest"
started=$(date +%s)
/usr/bin/tempest run --workspace-path "$WS.workspace.yaml" --workspace nubo \
  "${select[@]}" --concurrency "$conc" 2>&1 | tee "$WS/console.txt" | tail -40
echo "tempest run: $(($(date +%s) - started)) s (concurrency $conc)" | tee -a "$WS/console.txt"
/usr/bin/stestr last --subunit >"$WS/results.subunit" 2>/dev/null
/usr/bin/subunit2junitxml <"$WS/results.subunit" >"$WS/results.xml" 2>/dev/null
if [ -n "${ALL:-}" ]; then
  # what passes, fails and skips, ids without Tempest's [idempotent id] tags
  selected=$(/usr/bin/stestr list "^tempest\.api\.$ALL\." 2>/dev/null | grep -c '^tempest\.')
  /usr/bin/python3 - "$WS/results.xml" "$WS" "$selected" <<'PY'
import re, sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot()
out = {"passed": [], "failed": [], "skipped": []}
for c in r.iter("testcase"):
    name = c.get("name", "")
    kids = [x.tag for x in c]
    if name.startswith(("setUpClass", "tearDownClass")):
        # a failed or skipped class set-up: its tests never started
        if kids:
            out["skipped" if "skipped" in kids else "failed"].append(name)
        continue
    tid = c.get("classname", "") + "." + re.sub(r"\[.*$", "", name)
    kind = "skipped" if "skipped" in kids else "failed" if kids else "passed"
    out[kind].append(tid)
for kind, ids in out.items():
    with open("%s/%s.txt" % (sys.argv[2], kind), "w") as f:
        f.writelines(i + "\n" for i in sorted(ids))
tests = {k: [i for i in v if i.startswith("tempest.")] for k, v in out.items()}
classes = {k: len(v) - len(tests[k]) for k, v in out.items()}
total = int(sys.argv[3])
print("%d tests selected; %d did not start: class set-ups failed %d, skipped %d"
      % (total, total - sum(len(v) for v in tests.values()), classes["failed"],
         classes["skipped"]))
print("%d passed, %d failed, %d skipped"
      % (len(tests["passed"]), len(tests["failed"]), len(tests["skipped"])))
sys.exit(1 if out["failed"] else 0)
PY
  exit $?
fi
# Every listed test must have run and passed: a skip or a missing test fails.
/usr/bin/python3 - "$WS/results.xml" "$expected" <<'PY'
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot()
cases = r.iter("testcase")
ok = bad = 0
for c in cases:
    if c.get("name", "").startswith(("setUpClass", "tearDownClass")) and not list(c):
        continue
    if list(c):
        bad += 1
        print("NOT PASSED:", c.get("classname"), c.get("name"), [x.tag for x in c])
    else:
        ok += 1
exp = int(sys.argv[2])
print("tempest: %d passed of %d listed" % (ok, exp))
sys.exit(0 if ok >= exp and bad == 0 else 1)
PY
