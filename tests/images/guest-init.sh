#!/bin/busybox sh
# /init of the nubo test guest (busybox initramfs, no root mount).
# Serial console protocol (one line each, parsed by the tests):
#   GUEST-BOOTED kernel=<uname -r> uptime=<s>
#   CONFIG-DRIVE dev=<dev> hostname=<hostname> uuid=<uuid> fs=<iso9660|vfat>
#   CONFIG-DRIVE none                         (no LABEL=config-2 within 10 s)
#   CONFIG-DRIVE dev=<dev> error=<what>       (found but unreadable)
#   BLOCK-DEVICES <name> ...                  (from /sys/block; printed again
#                                              whenever the set changes)
#   HB <n> up=<s>                             (every 100 ms, forever)
#   POWER-OFF acpi                            (ACPI power button -> poweroff -f)
/bin/busybox mkdir -p /proc /sys /dev /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1
read -r up _ </proc/uptime
echo "GUEST-BOOTED kernel=$(uname -r) uptime=$up"

# --- graceful shutdown: ACPI power button (virsh shutdown) -> poweroff -f
mkdir -p /etc/acpi/PWRF
cat >/etc/acpi/PWRF/00000080 <<'EOF'
#!/bin/sh
echo "POWER-OFF acpi" >/dev/console
sync
poweroff -f
EOF
chmod 755 /etc/acpi/PWRF/00000080
start_acpi() {
    # busybox acpid reads the evdev of the kernel's "Power Button" input
    # device (it opens /dev/input/event* when it starts) and runs
    # /etc/acpi/PWRF/00000080 on KEY_POWER.
    acpid -f -c /etc/acpi -l /dev/null </dev/null >/dev/null 2>&1 &
}

# Kernel modules, dependency order resolved at build time from modules.dep.
# button and evdev come first so that acpid is started, and listens, as early as
# possible: an ACPI power button press before button.ko has enabled the
# event is dropped by the kernel (ACPICA clears it when the handler is
# installed), so a `virsh shutdown` sent before that point is lost.
acpi_started=""
while read -r m; do
    insmod "/lib/modules/$m" 2>/dev/null
    if [ -z "$acpi_started" ] && [ "$m" = evdev.ko ]; then
        start_acpi
        acpi_started=1
    fi
done </lib/modules/load.order
[ -n "$acpi_started" ] || start_acpi

# --- OpenStack config drive (LABEL=config-2, iso9660 or vfat)
# json_get FILE KEY: string value of a top-level key of a JSON object
json_get() {
    awk -v want="$2" '
    BEGIN { RS = "\001" }
    {
        s = $0; n = length(s); depth = 0; i = 1; key = ""; expect_val = 0
        while (i <= n) {
            c = substr(s, i, 1)
            if (c == "\"") {
                str = ""; i++
                while (i <= n) {
                    c = substr(s, i, 1)
                    if (c == "\\") { str = str substr(s, i + 1, 1); i += 2; continue }
                    if (c == "\"") break
                    str = str c; i++
                }
                if (depth == 1 && expect_val) {
                    if (key == want) { print str; exit }
                    expect_val = 0; key = ""
                } else if (depth == 1) {
                    key = str
                }
            } else if (c == ":" && depth == 1) {
                expect_val = 1
            } else if (c == "," && depth == 1) {
                expect_val = 0; key = ""
            } else if (c == "{" || c == "[") {
                depth++; if (depth > 1) expect_val = 0
            } else if (c == "}" || c == "]") {
                depth--
            }
            i++
        }
    }' "$1"
}

mkdir -p /mnt/config
dev=""
i=0
while [ $i -lt 100 ]; do          # poll up to 10 s for the device to appear
    dev=$(findfs LABEL=config-2 2>/dev/null) && [ -n "$dev" ] && break
    dev=""
    i=$((i + 1))
    sleep 0.1
done
if [ -z "$dev" ]; then
    echo "CONFIG-DRIVE none"
elif mount -t iso9660 -o ro "$dev" /mnt/config 2>/dev/null; then
    fs=iso9660
elif mount -t vfat -o ro "$dev" /mnt/config 2>/dev/null; then
    fs=vfat
else
    echo "CONFIG-DRIVE dev=$dev error=mount-failed"
    dev=""
fi
if [ -n "$dev" ]; then
    md=/mnt/config/openstack/latest/meta_data.json
    if [ -r "$md" ]; then
        hn=$(json_get "$md" hostname)
        uuid=$(json_get "$md" uuid)
        [ -n "$hn" ] && hostname "$hn"
        echo "CONFIG-DRIVE dev=$dev hostname=$hn uuid=$uuid fs=$fs"
    else
        echo "CONFIG-DRIVE dev=$dev error=no-openstack/latest/meta_data.json fs=$fs"
    fi
    umount /mnt/config
fi

# --- block devices, then the heartbeat
block_devices() {    # sets $cur, no fork
    local b
    cur=""
    for b in /sys/block/*; do
        b=${b##*/}
        case $b in loop* | ram* | zram* | '*') continue ;; esac
        cur="$cur $b"
    done
}
# The wait is `read -t` on a FIFO that nobody writes to (a shell builtin:
# no fork), for the time left until the next beat on the guest's clock, so
# the rate stays at 10 per second even when a beat is late.
mkfifo /tmp/hb.fifo
exec 3<>/tmp/hb.fifo
centis() {      # "/proc/uptime seconds" (always 2 decimals) -> $now in 1/100 s
    local u=${1%.*}${1#*.}
    while [ "${u#0}" != "$u" ]; do u=${u#0}; done
    now=${u:-0}
}
read -r up _ </proc/uptime
centis "$up"
next=$now
last=""
n=0
while :; do
    block_devices
    if [ "$cur" != "$last" ]; then
        echo "BLOCK-DEVICES$cur"
        last=$cur
    fi
    read -r up _ </proc/uptime
    echo "HB $n up=$up"
    n=$((n + 1))
    centis "$up"
    next=$((next + 10))
    d=$((next - now))
    if [ $d -gt 10 ] || [ $d -lt -50 ]; then    # clock jumped or far behind: resync
        next=$((now + 10))
        d=10
    fi
    if [ $d -ge 10 ]; then
        read -t 0.1 -u 3 _
    elif [ $d -gt 0 ]; then
        read -t 0.0$d -u 3 _
    fi
done
