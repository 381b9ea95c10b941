#!/usr/bin/env bash
# README command 2: runs every test. Installs what is missing, builds the
# normal build (warnings as errors), the ASan/UBSan build and, for the tests
# with real guests, the test guest image (tests/images/build.sh, exported as
# NUBO_TEST_IMAGE_DIR), makes sure libvirtd runs (scripts/libvirt-up.sh),
# then runs
#   1. unit tests (cmocka) on both builds,
#   2. the end-to-end suite (pytest + the real openstack CLI/openstacksdk)
#      once, against the sanitizer build, which must leave no sanitizer
#      report (NUBO_E2E_BUILDS="build build-asan" runs it on both),
#   3. a smoke run of bench/bench.py on the normal build,
#   4. Tempest with the checked-in list (tests/tempest/include-list.txt)
#      against the normal build, started as soon as that build exists and
#      running beside everything after it (it mostly waits),
#   5. Tempest's SSH tests (tests/tempest/include-list-guests.txt) against
#      real guests of the normal build (VALIDATION=1 tests/tempest/run.sh).
# Prints each stage's wall time, and ends with one line "N passed, N failed"
# over everything.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
t0=$SECONDS stage_names=() stage_secs=()
stage_t=$SECONDS stage_name=
stage() { # name: ends the running stage, starts the next
  [ -z "$stage_name" ] || { stage_names+=("$stage_name"); stage_secs+=($((SECONDS - stage_t))); }
  stage_name=$1 stage_t=$SECONDS
  [ -z "$1" ] || echo "== $1"
}
print_times() {
  stage ""
  echo "== stage wall times"
  for i in "${!stage_names[@]}"; do printf '  %-34s %5d s\n' "${stage_names[$i]}" "${stage_secs[$i]}"; done
  printf '  %-34s %5d s\n' "total" $((SECONDS - t0))
}

stage "install dependencies"
bash scripts/install-deps.sh || exit 1
export PATH=/usr/bin:/bin:/usr/sbin:/sbin
out=${NUBO_TEST_OUT:-$root/build-test-results}
rm -rf "$out"; mkdir -p "$out"

build() { # dir, meson options...
  local dir=$1; shift
  [ -f "$dir/build.ninja" ] || meson setup "$dir" "$@" >/dev/null || return 1
  ninja -C "$dir" >"$out/$(basename "$dir").build.log" 2>&1 || { tail -50 "$out/$(basename "$dir").build.log"; return 1; }
}
stage "normal build"
build build -Dwerror=true || exit 1

passed=0 failed=0
count_junit() { # file -> adds to passed/failed
  local f=$1
  [ -f "$f" ] || { failed=$((failed + 1)); return; }
  read -r t fl er sk < <(/usr/bin/python3 - "$f" <<'PY'
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot()
suites = [r] if r.tag == "testsuite" else r.findall("testsuite")
t = sum(int(s.get("tests", 0)) for s in suites)
f = sum(int(s.get("failures", 0)) for s in suites)
e = sum(int(s.get("errors", 0)) for s in suites)
k = sum(int(s.get("skipped", 0)) for s in suites)
print(t, f, e, k)
PY
)
  passed=$((passed + t - fl - er - sk)); failed=$((failed + fl + er))
}

# Tempest (normal build, fake driver) starts now and runs beside every later
# stage: it spends most of its time in its own waits (its subnet client
# sleeps 10 s before each delete), so it overlaps well on two cores.
tempest_pid= tempest_t=$SECONDS
if [ -x tests/tempest/run.sh ] && [ -z "${NUBO_SKIP_TEMPEST:-}" ]; then
  WS=$out/tempest bash tests/tempest/run.sh "$root/build/nubo" >"$out/tempest.log" 2>&1 &
  tempest_pid=$!
fi

stage "sanitizer build"
build build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug || exit 1

stage "clang-format"
if git ls-files 'src/*.[ch]' 'tests/unit/*.c' 'tests/fuzz/*.c' | xargs clang-format --dry-run --Werror 2>"$out/format.log"; then
  passed=$((passed + 1))
else
  echo "files not formatted (clang-format -i them):"; grep -o '^[^:]*' "$out/format.log" | sort -u
  failed=$((failed + 1))
fi

# The request context's error slot is read and written only through
# common/ctx.h (nb_error, nb_ctx_child/clear_error/forward_error and the
# accessors), so no caller can leave a stale error behind by hand.
stage "context error fields"
if ! grep -rnE --include='*.[ch]' '\berr_(status|msg|name|code)\b' src |
  grep -vE '^src/common/ctx\.[ch]:' >"$out/ctx-fields.log"; then
  passed=$((passed + 1))
else
  echo "error fields of struct nb_ctx used outside src/common/ctx.c (use the ctx.h functions):"
  cat "$out/ctx-fields.log"
  failed=$((failed + 1))
fi

# One owner per table (src/db/owners.tsv): SQL outside the owner's folder
# fails unless tests/owners/known-violations.tsv lists it; prints the known
# violations left per owner. The self-test first proves the check can fail.
stage "table owners"
if /usr/bin/python3 tests/owners/check.py --self-test >"$out/owners-selftest.log" 2>&1 &&
   /usr/bin/python3 tests/owners/check.py; then
  passed=$((passed + 1))
else
  grep -v '^self-test: ok' "$out/owners-selftest.log"
  failed=$((failed + 1))
fi

# Nothing in git that only means something on the machine it was made on:
# no symbolic links (a helper's worktree link once replaced the image
# folder of every clone), no build output, no file over 1 MiB.
stage "tracked files, migration twins"
git ls-files -s | awk '$1 == "120000" {print "symbolic link: " $4}' >"$out/tracked.log"
git ls-files -z | xargs -0 -r stat -c '%s %n' 2>/dev/null |
  awk '$1 > 1048576 {print "over 1 MiB: " $2}' >>"$out/tracked.log"
git ls-files | grep -E '(^|/)(build[^/]*|tests/images/out)/|\.(o|a|so|qcow2|raw|img)$' |
  sed 's/^/build output or image: /' >>"$out/tracked.log"
# every migration has its MariaDB twin with the same number
for f in src/db/migrations/[0-9]*.sql; do
  n=$(basename "$f"); n=${n%%_*}
  compgen -G "src/db/migrations/mariadb/${n}_*.sql" >/dev/null ||
    echo "migration without a MariaDB twin: $f (src/db/migrations/mariadb/${n}_*.sql)" >>"$out/tracked.log"
done
if [ -s "$out/tracked.log" ]; then
  cat "$out/tracked.log"; cat "$out/tracked.log" >>"$out/recap.txt"; failed=$((failed + 1))
else
  passed=$((passed + 1))
fi

# Tests with real guests boot tests/images/build.sh's image under the system
# libvirtd; they find it through NUBO_TEST_IMAGE_DIR, and must not skip.
export NUBO_REQUIRE_LIBVIRT=1
stage "test guest image and libvirtd"
# Each is tried apart, so that one failing does not hide the other; a
# failed image build is retried once from scratch (FORCE=1) and what it
# printed, with what the machine has of kernels and disk, is kept for the
# recap at the end (CI shows the end of the output).
image_ok=0
for try in 1 2; do
  if FORCE=$((try - 1)) bash tests/images/build.sh "$root/tests/images/out" >"$out/image.log" 2>&1; then
    image_ok=1; break
  fi
  echo "tests/images/build.sh failed (try $try):"; tail -20 "$out/image.log"
  { echo "test image, try $try:"; tail -20 "$out/image.log"
    echo "  /boot: $(ls /boot 2>&1 | tr '\n' ' ')"
    echo "  /lib/modules: $(ls /lib/modules 2>&1 | tr '\n' ' ')"
    echo "  disk: $(df -h "$root" /tmp 2>&1 | tail -n +2 | tr -s ' ' | tr '\n' ';')"; } >>"$out/recap.txt"
  sleep 2
done
if bash scripts/libvirt-up.sh >"$out/libvirt-up.log" 2>&1; then libvirt_ok=1; else
  libvirt_ok=0; cat "$out/libvirt-up.log"
  { echo "libvirt-up:"; cat "$out/libvirt-up.log"; } >>"$out/recap.txt"
fi
if [ $image_ok = 1 ] && [ $libvirt_ok = 1 ]; then
  export NUBO_TEST_IMAGE_DIR=$root/tests/images/out
  passed=$((passed + 1))
else
  echo "no test guest image or no libvirtd (see above)"
  failed=$((failed + 1))
fi

# The normal build's e2e coverage is Tempest and this smoke run of the
# benchmarks (every boot must end ACTIVE), with ports on the seeded network.
stage "benchmark smoke (normal build)"
if /usr/bin/python3 bench/bench.py --smoke --networks auto --bin "$root/build/nubo"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi

stage "unit tests (both builds)"
bash scripts/rabbitmq-up.sh || echo "RabbitMQ does not answer: the bus unit suite will fail (see /var/log/rabbitmq)"
for b in build build-asan; do
  meson test -C "$b" --suite unit --print-errorlogs || true
  count_junit "$b/meson-logs/testlog.junit.xml"
done

# The MariaDB backend: its unit tests against a throwaway server and the
# control-plane modules that pass on it so far (docs/architecture.md,
# Database), with the normal build; the server is removed afterwards.
stage "MariaDB (backend unit tests and e2e modules, Galera faults)"
if NUBO_WITH_MARIADB=1 bash scripts/install-deps.sh && bash tests/db/mariadb.sh start; then
  url=$(bash tests/db/mariadb.sh createdb nubo_unit nubo_unit unitpw)
  for t in mariadb db_dialect lease; do
    if NUBO_TEST_MARIADB_URL=$url "build/tests/unit/test_$t"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  done
  NUBO_TEST_DB=mariadb NUBO_BIN=$root/build/nubo /usr/bin/python3 -m pytest -q -p no:cacheprovider -n 2 \
    --dist loadgroup -W ignore::DeprecationWarning \
    tests/e2e/test_identity.py tests/e2e/test_status.py tests/e2e/test_trace.py tests/e2e/test_metrics.py \
    tests/e2e/test_control_planes.py tests/e2e/test_control_planes_front.py \
    tests/e2e/test_mariadb_faults.py tests/e2e/test_placement.py \
    tests/e2e/test_doctor.py tests/e2e/test_network.py tests/e2e/test_servers.py \
    tests/e2e/test_scheduling.py tests/e2e/test_resources.py tests/e2e/test_actions.py \
    --junitxml="$out/e2e-mariadb.xml" -o junit_family=xunit2
  count_junit "$out/e2e-mariadb.xml"
  bash tests/db/mariadb.sh teardown
  # one Galera node killed -9 and brought back under load, behind HAProxy
  # (tests/db/galera.sh; the cluster ~25 s to start, the module ~40 s)
  if bash tests/db/galera.sh start >"$out/galera.log" 2>&1; then
    NUBO_TEST_DB=galera NUBO_BIN=$root/build/nubo /usr/bin/python3 -m pytest -q -p no:cacheprovider \
      -W ignore::DeprecationWarning tests/e2e/test_galera_faults.py \
      --junitxml="$out/e2e-galera.xml" -o junit_family=xunit2
    count_junit "$out/e2e-galera.xml"
  else
    echo "the Galera cluster did not start (see $out/galera.log)"
    failed=$((failed + 1))
  fi
  bash tests/db/galera.sh teardown >>"$out/galera.log" 2>&1 || true
else
  echo "MariaDB could not be installed or started"
  failed=$((failed + 1))
fi

asan_dir="$out/asan"; mkdir -p "$asan_dir"
for b in ${NUBO_E2E_BUILDS:-build-asan}; do
  stage "end-to-end tests ($b)"
  if [ "$b" = build-asan ]; then
    export ASAN_OPTIONS="log_path=$asan_dir/asan:detect_leaks=1:abort_on_error=0"
    export UBSAN_OPTIONS="log_path=$asan_dir/ubsan:print_stacktrace=1:halt_on_error=0"
  fi
  # loadgroup: the modules marked xdist_group("hosts") share the simulated
  # hypervisor hosts (tests/hosts/hosts.sh), so they run in one worker
  NUBO_BIN=$root/$b/nubo /usr/bin/python3 -m pytest -q -p no:cacheprovider -n "${NUBO_E2E_WORKERS:-2}" --dist loadgroup \
    -W ignore::DeprecationWarning tests/e2e --durations=25 \
    --junitxml="$out/e2e-$b.xml" -o junit_family=xunit2 ${NUBO_E2E_ARGS:-}
  count_junit "$out/e2e-$b.xml"
  unset ASAN_OPTIONS UBSAN_OPTIONS
done
if compgen -G "$asan_dir/*" >/dev/null; then
  echo "== sanitizer reports:"; head -c 20000 "$asan_dir"/*
  failed=$((failed + 1))
else
  echo "== sanitizer: no reports"; passed=$((passed + 1))
fi

if [ -n "$tempest_pid" ]; then
  stage "waiting for Tempest"
  wait "$tempest_pid"
  echo "== tempest (ran $((SECONDS - tempest_t)) s beside the stages above)"
  cat "$out/tempest.log"
  count_junit "$out/tempest/results.xml"
fi

# Tempest's SSH tests (interop validation and the network scenarios) on
# real TCG guests wired by the network agent, reached by floating IP; after
# the e2e stage, so no other guests compete for the two cores.
if [ -x tests/tempest/run.sh ] && [ -z "${NUBO_SKIP_TEMPEST:-}" ]; then
  stage "Tempest with real guests (validation)"
  WS=$out/tempest-guests VALIDATION=1 bash tests/tempest/run.sh "$root/build/nubo" \
    >"$out/tempest-guests.log" 2>&1
  tail -8 "$out/tempest-guests.log"
  count_junit "$out/tempest-guests/results.xml"
fi

if [ -s "$out/recap.txt" ]; then echo "== what failed before the tests"; cat "$out/recap.txt"; fi
print_times
echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
