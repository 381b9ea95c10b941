#!/usr/bin/env bash
# Boot the test guest under the system libvirtd with TCG and time it.
#
#   tests/images/boot-test.sh [-n RUNS] [-f qcow2|raw] [-c iso|vfat|none] [-o OUTDIR|-i IMAGE]
#
#   -n RUNS   boots in a row (default 1)
#   -f        which image to boot: guest.qcow2 (default) or guest.raw
#   -c        config drive: iso on an IDE cdrom (hdc, default, like Nova with
#             machine pc), vfat on a virtio disk (vdb), or none
#   -o        image directory (default tests/images/out; built if needed)
#   -i        boot this image file instead (format given by -f; no build)
# Env: WAIT=seconds to wait for each milestone (default 60),
#      SHUTDOWN_WAIT=seconds for `virsh shutdown` to stop the guest (default 20)
#      DISK_CACHE=cache mode of the boot disk (default none, as Nova on local files)
#
# Each run: a per-run directory (copy of the image + qcow2 overlay, config
# drive, console file: libvirt's DAC driver chowns what it uses), a transient
# domain (<domain type='qemu'>, machine pc, 128 MiB, 1 vCPU, serial console
# to a file), `virsh create`, then the times since just before `virsh create`
# of: create returning, first console byte, GUEST-BOOTED, CONFIG-DRIVE, HB 10.
# Then `virsh shutdown` (ACPI power button) and the times to the guest's
# POWER-OFF line and to the domain being gone. Then destroy/undefine/cleanup.
# Installs libvirt/QEMU if missing; starts virtlogd/libvirtd with
# scripts/libvirt-up.sh (no systemd).
# Exit status 0 only if every run booted, read the config drive and shut down.
set -uo pipefail
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RUNS=1 FMT=qcow2 CFG=iso OUTDIR=$HERE/out IMG=""
while getopts n:f:c:o:i:h opt; do
    case $opt in
    n) RUNS=$OPTARG ;;
    f) FMT=$OPTARG ;;
    c) CFG=$OPTARG ;;
    o) OUTDIR=$OPTARG ;;
    i) IMG=$(realpath "$OPTARG") ;;
    *) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
case $FMT in qcow2 | raw) ;; *) echo "bad -f $FMT" >&2; exit 2 ;; esac
case $CFG in iso | vfat | none) ;; *) echo "bad -c $CFG" >&2; exit 2 ;; esac
WAIT=${WAIT:-60}
SHUTDOWN_WAIT=${SHUTDOWN_WAIT:-20}
DISK_CACHE=${DISK_CACHE:-none}
URI=qemu:///system
VIRSH=(virsh -q -c "$URI")

log() { printf 'boot-test: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ------------------------------------------------------------- packages
ensure_pkgs() {
    local p miss=()
    for p in "$@"; do
        [[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null) == ii* ]] || miss+=("$p")
    done
    [ ${#miss[@]} -eq 0 ] && return 0
    log "installing ${miss[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends "${miss[@]}" >/dev/null ||
        { apt-get update -q >/dev/null &&
          apt-get install -y -q --no-install-recommends "${miss[@]}" >/dev/null; } ||
        die "apt-get install ${miss[*]} failed"
}
ensure_pkgs libvirt-daemon-system qemu-system-x86 qemu-utils perl

# -------------------------------------------------------------- daemons
"$HERE/../../scripts/libvirt-up.sh" || die "libvirtd is not available"

# --------------------------------------------------------------- images
if [ -z "$IMG" ]; then
    "$HERE/build.sh" "$OUTDIR" || die "build.sh failed"
    IMG=$OUTDIR/guest.$FMT
fi
[ -s "$IMG" ] || die "no $IMG"

# ------------------------------------------------------------- one run
domain_xml() {  # name uuid disk fmt cfgfile console
    local cfgxml=""
    case $CFG in
    iso)  cfgxml="<disk type='file' device='cdrom'><driver name='qemu' type='raw'/><source file='$5'/><target dev='hdc' bus='ide'/><readonly/></disk>" ;;
    vfat) cfgxml="<disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='$5'/><target dev='vdb' bus='virtio'/><readonly/></disk>" ;;
    esac
    cat <<EOF
<domain type='qemu'>
  <name>$1</name>
  <uuid>$2</uuid>
  <memory unit='MiB'>128</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/></os>
  <features><acpi/><apic/></features>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='$4' cache='$DISK_CACHE'/>
      <source file='$3'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    $cfgxml
    <serial type='file'><source path='$6'/><target port='0'/></serial>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
}

# Follows the console file; prints "<event> <seconds since T0> [line]" once
# per event: first-byte, GUEST-BOOTED, CONFIG-DRIVE, BLOCK-DEVICES, HB10, POWER-OFF.
FOLLOWER='
use strict; use warnings; use Time::HiRes qw(time sleep);
my ($file, $t0) = @ARGV; $| = 1;
my @pat = (["GUEST-BOOTED", qr/^GUEST-BOOTED /], ["CONFIG-DRIVE", qr/^CONFIG-DRIVE /],
           ["BLOCK-DEVICES", qr/^BLOCK-DEVICES/], ["HB10", qr/^HB 10 /],
           ["POWER-OFF", qr/^POWER-OFF/]);
my (%seen, $fh, $buf, $first);
$buf = "";
while (1) {
    if (!$fh) { my $h; if (open($h, "<", $file)) { $fh = $h } else { sleep 0.005; next } }
    my $n = sysread($fh, my $chunk, 65536);
    if (!$n) { sleep 0.005; next }
    if (!$first) { $first = 1; printf "first-byte %.3f\n", time - $t0 }
    $buf .= $chunk;
    while ($buf =~ s/^([^\n]*)\n//) {
        my $l = $1; $l =~ s/\r//g;
        for my $p (@pat) {
            next if $seen{$p->[0]} || $l !~ $p->[1];
            $seen{$p->[0]} = 1;
            printf "%s %.3f %s\n", $p->[0], time - $t0, $l;
        }
    }
}'

RUNDIR="" NAME="" FPID=""
cleanup_run() {
    if [ -n "$NAME" ]; then
        "${VIRSH[@]}" destroy "$NAME" >/dev/null 2>&1
        "${VIRSH[@]}" undefine "$NAME" >/dev/null 2>&1
    fi
    if [ -n "$FPID" ]; then kill "$FPID" 2>/dev/null; wait "$FPID" 2>/dev/null; fi
    [ -n "$RUNDIR" ] && rm -rf "$RUNDIR"
    RUNDIR="" NAME="" FPID=""
}
trap cleanup_run EXIT
trap 'exit 130' INT TERM

declare -A EV EVLINE
# wait_ev EVENT TIMEOUT: read follower output until EVENT has been seen
wait_ev() {
    local want=$1 deadline=$((${EPOCHREALTIME/./} + $2 * 1000000)) ev t rest left
    while [ -z "${EV[$want]:-}" ]; do
        left=$(( (deadline - ${EPOCHREALTIME/./}) / 1000000 ))
        [ "$left" -ge 0 ] || return 1
        read -r -t "$((left + 1))" -u "${FOLLOW[0]}" ev t rest || return 1
        EV[$ev]=$t; EVLINE[$ev]=$rest
    done
}
since() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

RESULTS=()
run_once() {   # run number
    local n=$1 uuid host disk cfgfile con t0 t1 tsd st ok=1
    EV=() EVLINE=()
    RUNDIR=$(mktemp -d /tmp/nubo-boottest.XXXXXX)
    chmod 755 "$RUNDIR"         # QEMU runs as libvirt-qemu
    uuid=$(cat /proc/sys/kernel/random/uuid)
    host=boottest-$n-$$
    NAME=nubo-boottest-$$-$n
    if [ "$FMT" = qcow2 ]; then
        cp "$IMG" "$RUNDIR/base.qcow2"
        qemu-img create -q -f qcow2 -F qcow2 -b "$RUNDIR/base.qcow2" "$RUNDIR/disk"
    else
        cp --sparse=always "$IMG" "$RUNDIR/disk"
    fi
    disk=$RUNDIR/disk
    cfgfile=$RUNDIR/disk.config
    [ "$CFG" = none ] || "$HERE/make-config-drive.sh" "$cfgfile" "$CFG" "$uuid" "$host" ||
        { log "make-config-drive.sh failed"; return 1; }
    con=$RUNDIR/console.log
    domain_xml "$NAME" "$uuid" "$disk" "$FMT" "$cfgfile" "$con" >"$RUNDIR/domain.xml"

    t0=$EPOCHREALTIME
    coproc FOLLOW { exec perl -e "$FOLLOWER" "$con" "$t0"; }
    FPID=$FOLLOW_PID
    t1=-
    if "${VIRSH[@]}" create "$RUNDIR/domain.xml" >/dev/null; then
        t1=$(since "$t0" "$EPOCHREALTIME")
        local e
        for e in first-byte GUEST-BOOTED CONFIG-DRIVE HB10; do
            wait_ev "$e" "$WAIT" || { log "run $n: no $e within ${WAIT}s"; ok=0; break; }
        done
    else
        log "run $n: virsh create failed"; ok=0
    fi
    # the BLOCK-DEVICES line comes right before HB 0
    [ "$ok" = 1 ] && { wait_ev BLOCK-DEVICES 1 || { log "run $n: no BLOCK-DEVICES line"; ok=0; }; }

    # checks on what the guest reported
    if [ "$ok" = 1 ]; then
        local cd=${EVLINE[CONFIG-DRIVE]} bd=" ${EVLINE[BLOCK-DEVICES]#BLOCK-DEVICES} "
        case $CFG in
        none) [[ $cd == "CONFIG-DRIVE none" ]] || { log "run $n: unexpected: $cd"; ok=0; } ;;
        *)    [[ $cd == *" hostname=$host uuid=$uuid "* ]] ||
                  { log "run $n: config drive not read right: $cd"; ok=0; } ;;
        esac
        [[ $bd == *" vda "* ]] || { log "run $n: no vda in: $bd"; ok=0; }
        [ "$CFG" = iso ] && [[ $bd != *" sr0 "* ]] && { log "run $n: no sr0 in: $bd"; ok=0; }
        [ "$CFG" = vfat ] && [[ $bd != *" vdb "* ]] && { log "run $n: no vdb in: $bd"; ok=0; }
    fi

    # graceful shutdown through the ACPI power button
    local poff=- gone=- sd_ok=0
    if [ "$ok" = 1 ]; then
        tsd=$(since "$t0" "$EPOCHREALTIME")
        if "${VIRSH[@]}" shutdown "$NAME" >/dev/null; then
            local deadline=$((${EPOCHREALTIME/./} + SHUTDOWN_WAIT * 1000000))
            while [ "${EPOCHREALTIME/./}" -lt "$deadline" ]; do
                st=$("${VIRSH[@]}" domstate "$NAME" 2>/dev/null) || { sd_ok=1; break; }
                [ "$st" = "shut off" ] && { sd_ok=1; break; }
                sleep 0.05
            done
            [ "$sd_ok" = 1 ] && gone=$(since "$t0" "$EPOCHREALTIME")
            wait_ev POWER-OFF 1 && poff=$(since "$tsd" "${EV[POWER-OFF]}")
            [ "$gone" = - ] || gone=$(since "$tsd" "$gone")
        fi
        [ "$sd_ok" = 1 ] || { log "run $n: virsh shutdown did not stop the guest within ${SHUTDOWN_WAIT}s"; ok=0; }
    fi

    printf 'run %-2s %-7s %-7s %-12s %-12s %-7s | %-11s %-7s | %s\n' "$n" "$t1" \
        "${EV[first-byte]:--}" "${EV[GUEST-BOOTED]:--}" "${EV[CONFIG-DRIVE]:--}" \
        "${EV[HB10]:--}" "$poff" "$gone" "$([ "$ok" = 1 ] && echo ok || echo FAIL)"
    RESULTS+=("$t1 ${EV[first-byte]:--} ${EV[GUEST-BOOTED]:--} ${EV[CONFIG-DRIVE]:--} ${EV[HB10]:--} $poff $gone")
    if [ "${VERBOSE:-0}" = 1 ]; then
        log "console of run $n:"
        tr -d '\r' <"$con" 2>/dev/null | sed 's/^/    /' >&2
    elif [ "$ok" != 1 ]; then
        log "console of run $n (first 3000 bytes):"
        tr -d '\r' <"$con" 2>/dev/null | head -c 3000 | sed 's/^/    /' >&2
    fi
    [ "$n" = 1 ] && [ "$ok" = 1 ] && { log "console of run 1 (first lines):"; tr -d '\r' <"$con" | grep -v '^HB [2-9]' | head -8 | sed 's/^/    /' >&2; }
    # libvirt keeps a log per domain name: drop it when all went well
    if [ "$ok" = 1 ]; then
        rm -f "/var/log/libvirt/qemu/$NAME.log"
    else
        log "libvirt's log of run $n: /var/log/libvirt/qemu/$NAME.log"
    fi
    cleanup_run
    [ "$ok" = 1 ]
}

log "image $IMG ($(stat -c %s "$IMG") bytes), config drive: $CFG, $RUNS run(s)"
echo "seconds since just before 'virsh create'; shutdown columns: seconds since 'virsh shutdown'"
printf '%-6s %-7s %-7s %-12s %-12s %-7s | %-11s %-7s | %s\n' run create 1stbyte GUEST-BOOTED CONFIG-DRIVE "HB 10" "POWER-OFF" "gone" result
pass=0 fail=0
for ((i = 1; i <= RUNS; i++)); do
    if run_once "$i"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
done
if [ "$RUNS" -gt 1 ]; then
    printf '%s\n' "${RESULTS[@]}" | awk '
    { for (i = 1; i <= NF; i++) if ($i != "-") { v = $i + 0; if (!(i in mn) || v < mn[i]) mn[i] = v; if (!(i in mx) || v > mx[i]) mx[i] = v } }
    END { printf "min-max "; for (i = 1; i <= 7; i++) printf "%s ", (i in mn) ? sprintf("%.2f-%.2f", mn[i], mx[i]) : "-"; printf "\n" }'
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
