#!/usr/bin/env bash
# README command 2: runs every test. Installs what is missing, builds the
# normal build (warnings as errors), the ASan/UBSan build and, for the tests
# with real guests, the test guest image (tests/images/build.sh, exported as
# NUBO_TEST_IMAGE_DIR), makes sure libvirtd runs (scripts/libvirt-up.sh),
# then runs
#   1. unit tests (cmocka) on both builds,
#   2. the end-to-end suite (pytest + the real openstack CLI/openstacksdk)
#      against the normal build and again against the sanitizer build, which
#      must leave no sanitizer report,
#   3. Tempest with the checked-in list (tests/tempest/include-list.txt),
#      beside the sanitizer e2e run.
# Ends with one line "N passed, N failed" over everything.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bash scripts/install-deps.sh || exit 1
export PATH=/usr/bin:/bin:/usr/sbin:/sbin
out=${NUBO_TEST_OUT:-$root/build-test-results}
rm -rf "$out"; mkdir -p "$out"

build() { # dir, meson options...
  local dir=$1; shift
  [ -f "$dir/build.ninja" ] || meson setup "$dir" "$@" >/dev/null || return 1
  ninja -C "$dir" >"$out/$(basename "$dir").build.log" 2>&1 || { tail -50 "$out/$(basename "$dir").build.log"; return 1; }
}
build build -Dwerror=true || exit 1
build build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug || exit 1

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

echo "== clang-format"
if git ls-files 'src/*.[ch]' 'tests/unit/*.c' 'tests/fuzz/*.c' | xargs clang-format --dry-run --Werror 2>"$out/format.log"; then
  passed=$((passed + 1))
else
  echo "files not formatted (clang-format -i them):"; grep -o '^[^:]*' "$out/format.log" | sort -u
  failed=$((failed + 1))
fi

# Tests with real guests boot tests/images/build.sh's image under the system
# libvirtd; they find it through NUBO_TEST_IMAGE_DIR, and must not skip.
export NUBO_REQUIRE_LIBVIRT=1
echo "== test guest image and libvirtd"
if bash tests/images/build.sh "$root/tests/images/out" && bash scripts/libvirt-up.sh; then
  export NUBO_TEST_IMAGE_DIR=$root/tests/images/out
  passed=$((passed + 1))
else
  echo "no test guest image or no libvirtd (see above)"
  failed=$((failed + 1))
fi

echo "== unit tests"
bash scripts/rabbitmq-up.sh || echo "RabbitMQ does not answer: the bus unit suite will fail (see /var/log/rabbitmq)"
for b in build build-asan; do
  meson test -C "$b" --suite unit --print-errorlogs || true
  count_junit "$b/meson-logs/testlog.junit.xml"
done

run_e2e() { # label, binary
  local label=$1 bin=$2
  echo "== end-to-end tests ($label)"
  NUBO_BIN=$bin /usr/bin/python3 -m pytest -q -p no:cacheprovider -n 2 -W ignore::DeprecationWarning tests/e2e \
    --junitxml="$out/e2e-$label.xml" -o junit_family=xunit2 ${NUBO_E2E_ARGS:-}
  count_junit "$out/e2e-$label.xml"
}
run_e2e normal "$root/build/nubo"

# Tempest (normal build) runs beside the sanitizer e2e run: it spends most of
# its time in its own waits (its subnet client sleeps 10 s before each
# delete), so the two overlap well on two cores.
tempest_pid=
if [ -x tests/tempest/run.sh ] && [ -z "${NUBO_SKIP_TEMPEST:-}" ]; then
  WS=$out/tempest bash tests/tempest/run.sh "$root/build/nubo" >"$out/tempest.log" 2>&1 &
  tempest_pid=$!
fi

asan_dir="$out/asan"; mkdir -p "$asan_dir"
export ASAN_OPTIONS="log_path=$asan_dir/asan:detect_leaks=1:abort_on_error=0"
export UBSAN_OPTIONS="log_path=$asan_dir/ubsan:print_stacktrace=1:halt_on_error=0"
run_e2e asan "$root/build-asan/nubo"
unset ASAN_OPTIONS UBSAN_OPTIONS
if compgen -G "$asan_dir/*" >/dev/null; then
  echo "== sanitizer reports:"; head -c 20000 "$asan_dir"/*
  failed=$((failed + 1))
else
  echo "== sanitizer: no reports"; passed=$((passed + 1))
fi

if [ -n "$tempest_pid" ]; then
  wait "$tempest_pid"
  echo "== tempest"
  cat "$out/tempest.log"
  count_junit "$out/tempest/results.xml"
fi

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
