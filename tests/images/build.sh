#!/usr/bin/env bash
# Build nubo's test guest: a small BIOS-bootable disk image made from Debian
# packages only, without mounting anything.
#
#   tests/images/build.sh [OUTDIR]          (default: tests/images/out)
#
# Layout of the disk: a FAT "superfloppy" (no partition table) whose boot
# sector is SYSLINUX's; SYSLINUX loads the Debian cloud kernel from /boot and a
# busybox initramfs whose /init is guest-init.sh (next to this script). The
# cloud kernel has virtio/ata/cdrom/isofs/vfat as modules: the ones needed are
# put in the initramfs, in the dependency order given by modules.dep.
#
# Outputs in OUTDIR: guest.raw, guest.qcow2 (same content), initrd.img,
# build.stamp. Nothing is rebuilt when the stamp (kernel version and files,
# busybox, syslinux, this script and guest-init.sh) is unchanged.
#
# Env: KVER=<version>  kernel to use (default: newest /boot/vmlinuz-*-cloud-amd64)
#      FORCE=1         rebuild even if the stamp matches
#      GUEST_CURL=1    put curl (and its libraries) in the guest too
set -euo pipefail
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${1:-$HERE/out}
INIT_SRC=$HERE/guest-init.sh
DHCP_SRC=$HERE/guest-dhcp.sh
DHCP6_SRC=$HERE/guest-dhcp6.sh
T0=$EPOCHREALTIME

log() { printf 'build.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ------------------------------------------------------------- packages
PKGS=(linux-image-cloud-amd64 busybox-static syslinux syslinux-common mtools
      dosfstools cpio xz-utils qemu-utils dropbear-bin curl dhcpcd-base ndisc6)
missing_pkgs() {     # one dpkg-query for all: it is slow on a busy machine
    local p
    declare -A ok=()
    while read -r p st; do
        [ "${st:0:2}" = ii ] && ok[$p]=1
    done < <(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "$@" 2>/dev/null || true)
    for p in "$@"; do
        [ -n "${ok[$p]:-}" ] || printf '%s\n' "$p"
    done
}
ensure_pkgs() {
    local miss
    mapfile -t miss < <(missing_pkgs "$@")
    [ ${#miss[@]} -eq 0 ] && return 0
    [ "$(id -u)" = 0 ] || die "missing packages (need root to install): ${miss[*]}"
    log "installing ${miss[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q --no-install-recommends "${miss[@]}" >/dev/null; then
        apt-get update -q >/dev/null
        apt-get install -y -q --no-install-recommends "${miss[@]}" >/dev/null \
            || die "apt-get install ${miss[*]} failed"
    fi
}
ensure_pkgs "${PKGS[@]}"

# ----------------------------------------------------------------- inputs
if [ -z "${KVER:-}" ]; then
    KVER=$(ls /boot/vmlinuz-*-cloud-amd64 2>/dev/null | sed 's,.*/vmlinuz-,,' | sort -V | tail -1 || true)
fi
[ -n "$KVER" ] || die "no /boot/vmlinuz-*-cloud-amd64 (is linux-image-cloud-amd64 installed?)"
KERNEL=/boot/vmlinuz-$KVER
MODDIR=/lib/modules/$KVER
[ -r "$KERNEL" ] || die "cannot read $KERNEL"
[ -r "$MODDIR/modules.dep" ] || die "no $MODDIR/modules.dep"
BUSYBOX=/bin/busybox
applets=" $("$BUSYBOX" --list | tr '\n' ' ') "     # no `| grep -q`: SIGPIPE + pipefail
for a in sh acpid findfs poweroff insmod mount awk udhcpc wget ip timeout; do
    [[ $applets == *" $a "* ]] || die "$BUSYBOX has no $a applet"
done
# busybox-static is statically linked: ldd has nothing to say about it
if ldd "$BUSYBOX" >/dev/null 2>&1; then die "$BUSYBOX is dynamically linked (need busybox-static)"; fi
LDLINUX=$(command -v syslinux)
# dynamically linked programs of the guest: dropbear, dhcpcd (DHCPv6 only:
# busybox 1.35 has no udhcpc6) and rdisc6 (the RA's M/O flags), and with GUEST_CURL=1
# curl (what Tempest's remote client runs in a cirros-like guest). curl's
# libraries nearly triple the initramfs, which SYSLINUX reads slowly under
# TCG, so only the Tempest guest (tests/tempest/run.sh VALIDATION=1) has it
GUEST_BINS=(/usr/sbin/dropbear /usr/bin/dropbearkey /usr/sbin/dhcpcd /bin/rdisc6)
[ "${GUEST_CURL:-0}" = 1 ] && GUEST_BINS+=(/usr/bin/curl)
# what they need, as ldd finds it (+ the loader)
mapfile -t GUEST_LIBS < <(ldd "${GUEST_BINS[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && NF == 2 {print $1}' | sort -u)
[ ${#GUEST_LIBS[@]} -gt 0 ] || die "ldd found no libraries for ${GUEST_BINS[*]}"

stamp_text() {
    echo "kver=$KVER curl=${GUEST_CURL:-0}"
    stat -c '%n %s %Y' "$KERNEL" "$MODDIR/modules.dep" "$MODDIR/modules.builtin" \
        "$BUSYBOX" "$LDLINUX" "${GUEST_BINS[@]}" "${GUEST_LIBS[@]}" 2>/dev/null
    cat "${BASH_SOURCE[0]}" "$INIT_SRC" "$DHCP_SRC" "$DHCP6_SRC" | sha256sum  # contents, not paths
}
STAMP=$(stamp_text | sha256sum | cut -d' ' -f1)
if [ "${FORCE:-0}" != 1 ] && [ -s "$OUT/guest.raw" ] && [ -s "$OUT/guest.qcow2" ] &&
   [ "$(cat "$OUT/build.stamp" 2>/dev/null)" = "$STAMP" ]; then
    log "up to date ($OUT, kernel $KVER)"
    exit 0
fi

mkdir -p "$OUT"
W=$(mktemp -d "${TMPDIR:-/tmp}/nubo-guest-build.XXXXXX")
trap 'rm -rf "$W"' EXIT
R=$W/root
mkdir -p "$R"/{bin,dev,proc,sys,mnt,tmp,etc,run,lib/modules}
cp "$BUSYBOX" "$R/bin/busybox"
install -m 0755 "$INIT_SRC" "$R/init"
install -m 0755 "$DHCP_SRC" "$R/bin/dhcp-event"
install -m 0755 "$DHCP6_SRC" "$R/bin/dhcp6-event"
# dhcpcd does DHCPv6 only, when guest-init.sh starts it (stateful or
# information request, as the RA's M/O flags say); the kernel keeps router
# discovery and SLAAC. No "dhcpcd" user: no privilege separation (fewer
# processes, no chroot)
cat >"$R/etc/dhcpcd.conf" <<'EOF2'
# the test guest's DHCPv6 client (tests/images/guest-init.sh starts it)
ipv6only
noipv6rs
duid ll
option dhcp6_name_servers, dhcp6_domain_search
EOF2
echo nubo-guest >"$R/etc/hostname"
# sudo: everything in the guest runs as root, so this one only drops
# sudo's own options and runs the command (Tempest's remote client
# prefixes some commands with sudo, as for cirros' user)
mkdir -p "$R/usr/bin"
cat >"$R/usr/bin/sudo" <<'EOF2'
#!/bin/sh
# not sudo: the guest has only root; runs the command as it is
while [ $# -gt 0 ]; do
    case $1 in
    --) shift; break ;;
    -u | -g | -C | -h | -p) shift 2 ;;
    -*) shift ;;
    *) break ;;
    esac
done
exec "$@"
EOF2
chmod 755 "$R/usr/bin/sudo"
# root's login shell (dropbear runs commands with it, "SHELL -c CMD"):
# busybox sh with iputils' -w for ping and ping6, a deadline for the
# whole run. busybox's ping waits -W (10 s) for an answer after the last
# of -c packets whatever -w says, so Tempest's "ping -c1 -w1" of an
# address that must not answer (the security group tests) took 10 s
# instead of 1; -w's value goes to -W too unless -W is given. Functions,
# as busybox sh runs its own applets ahead of anything on PATH.
cat >"$R/bin/root-sh" <<'EOF2'
#!/bin/busybox sh
# root's shell: busybox sh whose ping/ping6 keep -w (tests/images/build.sh)
deadline_ping() {
    local p=$1 a prev= w= W=
    shift
    for a in "$@"; do
        case $prev in -w) w=$a ;; esac
        case $a in -w?*) w=${a#-w} ;; -W*) W=1 ;; esac
        prev=$a
    done
    if [ -n "$w" ] && [ -z "$W" ]; then
        /bin/busybox "$p" -W "$w" "$@"
    else
        /bin/busybox "$p" "$@"
    fi
}
ping() { deadline_ping ping "$@"; }
ping6() { deadline_ping ping6 "$@"; }
if [ "${1:-}" = -c ] && [ $# -ge 2 ]; then
    root_sh_cmd=$2
    shift 2
    eval "$root_sh_cmd"
    exit
fi
exec /bin/busybox sh "$@"
EOF2
chmod 755 "$R/bin/root-sh"
# blkid: busybox has none; Tempest finds the config drive with
# "blkid -L config-2 -o device", which findfs answers
cat >"$R/usr/bin/blkid" <<'EOF2'
#!/bin/sh
# only "blkid -L LABEL | -U UUID [-o device]": the device, as findfs finds it
while [ $# -gt 0 ]; do
    case $1 in
    -L) exec /bin/busybox findfs "LABEL=$2" ;;
    -U) exec /bin/busybox findfs "UUID=$2" ;;
    -o) shift 2 ;;
    *) shift ;;
    esac
done
echo "blkid: only -L LABEL and -U UUID" >&2
exit 2
EOF2
chmod 755 "$R/usr/bin/blkid"

# ------------------------------------------------- dropbear, dhcpcd, rdisc6
# The SSH server (key authentication only, see guest-init.sh) and the
# DHCPv6 programs with the libraries ldd lists, at the same paths. root's password field is "x" with
# no /etc/shadow: not blank and not locked, and no password can match.
mkdir -p "$R/usr/sbin" "$R/usr/bin" "$R/root" "$R/etc/dropbear"
chmod 700 "$R/root"
for f in "${GUEST_BINS[@]}" "${GUEST_LIBS[@]}"; do
    mkdir -p "$R$(dirname "$f")"
    cp -L "$f" "$R$f"
done
for f in /lib/x86_64-linux-gnu/libnss_files.so.2; do   # getpwnam; tiny
    [ -e "$f" ] && cp -L "$f" "$R$f"
done
echo 'root:x:0:0:root:/root:/bin/root-sh' >"$R/etc/passwd"
echo 'root:x:0:' >"$R/etc/group"
printf '/bin/sh\n/bin/root-sh\n' >"$R/etc/shells"
printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n' >"$R/etc/nsswitch.conf"

# --------------------------------------------------------- kernel modules
# Wanted: virtio disk (vda...), IDE cdrom (pc machine's config drive; the
# cloud kernel has no AHCI, so a q35 SATA cdrom is invisible), virtio-scsi and
# sd (volumes on a SCSI bus), iso9660 and vfat (+ the charsets they mount
# with: cp437/ascii for vfat, utf8 for Joliet), the ACPI power button and
# evdev for acpid (first, so that /init can start acpid early), virtio_net
# for the NIC (last: nothing else waits for it). A module
# that is built in (modules.builtin) is skipped; anything else missing is an
# error.
WANT=(button evdev virtio_pci virtio_blk virtio_scsi ata_piix sr_mod sd_mod cdrom
      isofs vfat nls_cp437 nls_ascii nls_utf8 virtio_net)
declare -A DEP=() SEEN=()
while IFS= read -r line; do
    path=${line%%:*}
    DEP[$path]=${line#*:}
done <"$MODDIR/modules.dep"
declare -A BYNAME=()
for path in "${!DEP[@]}"; do
    b=${path##*/}; b=${b%%.ko*}
    BYNAME[$b]=$path
    BYNAME[${b//-/_}]=$path
done
declare -A BUILTIN=()
while IFS= read -r path; do
    b=${path##*/}; b=${b%%.ko*}
    BUILTIN[$b]=1; BUILTIN[${b//-/_}]=1
done <"$MODDIR/modules.builtin"
ORDER=()
add_mod() {     # depth first over modules.dep: dependencies before users
    local path=$1 d
    [ -n "${SEEN[$path]:-}" ] && return 0
    SEEN[$path]=1
    for d in ${DEP[$path]}; do add_mod "$d"; done
    ORDER+=("$path")
}
nbuiltin=0
for m in "${WANT[@]}"; do
    if [ -n "${BYNAME[$m]:-}" ]; then
        add_mod "${BYNAME[$m]}"
    elif [ -n "${BUILTIN[$m]:-}" ]; then
        nbuiltin=$((nbuiltin + 1))
    else
        die "module $m neither in modules.dep nor modules.builtin of $KVER"
    fi
done
: >"$R/lib/modules/load.order"
for path in "${ORDER[@]}"; do
    b=${path##*/}
    case $b in
    *.ko.xz)  xz -dc "$MODDIR/$path" >"$R/lib/modules/${b%.xz}"; b=${b%.xz} ;;
    *.ko.zst) zstd -qdc "$MODDIR/$path" >"$R/lib/modules/${b%.zst}"; b=${b%.zst} ;;
    *.ko.gz)  gzip -dc "$MODDIR/$path" >"$R/lib/modules/${b%.gz}"; b=${b%.gz} ;;
    *)        cp "$MODDIR/$path" "$R/lib/modules/$b" ;;
    esac
    echo "$b" >>"$R/lib/modules/load.order"
done

# -------------------------------------------------------------- initramfs
# The kernel's built-in initramfs already has /dev/console: no mknod needed.
# xz: the kernel's decompressor allocates the whole dictionary; the default
# (-9: 64 MiB) makes a 128 MiB guest panic ("System is deadlocked on
# memory"), so keep it at 1 MiB. --check=crc32: the kernel has no crc64.
# preset 1: ~4x faster to build than 9e for +7% (~100 KB) of initramfs.
find "$R" -exec touch -h -d @0 {} +
(cd "$R" && find . | sort | cpio -o -H newc --quiet --reproducible -R 0:0) |
    xz -T1 --check=crc32 --lzma2=preset=1,dict=1MiB >"$W/initrd.img"

# ------------------------------------------------------------------- disk
# Kernel command line: panic=-1 reboots at once on a panic (e.g. /init
# dying); the rest shortens a TCG boot (~20% less kernel time measured):
# no Spectre/Meltdown mitigations to patch in, no crypto self-tests, no
# clocksource watchdog or IO-APIC timer check.
cat >"$W/syslinux.cfg" <<'EOF'
SERIAL 0 115200
DEFAULT linux
PROMPT 0
TIMEOUT 0
LABEL linux
  KERNEL /vmlinuz
  INITRD /initrd.img
  APPEND console=ttyS0,115200 quiet panic=-1 mitigations=off cryptomgr.notests tsc=reliable no_timer_check
EOF
cp "$KERNEL" "$W/vmlinuz"
touch -d @0 "$W/vmlinuz" "$W/initrd.img" "$W/syslinux.cfg"
ksz=$(stat -c %s "$W/vmlinuz"); isz=$(stat -c %s "$W/initrd.img")
kib=$(( (ksz + isz) / 1024 + 640 ))     # + ldlinux.sys/.c32 (~120 KiB) and FAT slack
RAW=$W/guest.raw
mkfs.vfat -C -n NUBOGUEST -i 6e75626f "$RAW" "$kib" >/dev/null
syslinux --install "$RAW"               # mtools based: works on a plain file
export MTOOLS_SKIP_CHECK=1
mcopy -m -i "$RAW" "$W/vmlinuz" ::vmlinuz
mcopy -m -i "$RAW" "$W/initrd.img" ::initrd.img
mcopy -m -i "$RAW" "$W/syslinux.cfg" ::syslinux.cfg
qemu-img convert -f raw -O qcow2 "$RAW" "$W/guest.qcow2"
touch "$W/initrd.img"

# publish atomically-ish: stamp last, so a half-done build is never "up to date"
rm -f "$OUT/build.stamp"
mv -f "$W/initrd.img" "$OUT/initrd.img"
mv -f "$RAW" "$OUT/guest.raw"
mv -f "$W/guest.qcow2" "$OUT/guest.qcow2"
echo "$STAMP" >"$OUT/build.stamp"

T1=$EPOCHREALTIME
log "kernel $KVER, ${#ORDER[@]} modules (+$nbuiltin built in): $(tr '\n' ' ' <"$R/lib/modules/load.order")"
log "$(stat -c '%n %s' "$OUT/initrd.img" "$OUT/guest.raw" "$OUT/guest.qcow2" | tr '\n' ' ')"
log "built in $(awk -v a="$T0" -v b="$T1" 'BEGIN{printf "%.2f", b-a}') s"
