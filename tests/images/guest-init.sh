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
# and, from the network job (in the background: the lines above come as
# before whatever the network does, and interleave with these):
#   NET-START mac=<mac> up=<s>  |  NET-START none     (eth0 within 5 s or not)
#   DHCP-LEASE ip=.. mask=.. router=.. mtu=.. dns=.. hostname=.. up=..
#   NET-UP addr=<ip/len> mtu=<mtu> routes=<r;r;..> up=<s>  (guest-dhcp.sh)
#   DHCP-LEASE none up=<s>                    (no lease within 60 s)
#   NET6 addr=<ip6/len> up=<s>                (eth0's first global IPv6 address,
#                                              by SLAAC or DHCPv6, once DAD is done)
#   NET6 none up=<s>                          (none within 90 s)
#   RA6 managed=<yes|no> other=<yes|no> router=<ll> up=<s>  (an IPv6 router's
#                                              M/O flags; nothing without one)
#   RA6 error=<rdisc6's last line> up=<s>     (a route from an RA, but rdisc6 failed)
#   DHCP6-LEASE addr=<ip6> dns=<a,b> domain=<d> up=<s>  (M: stateful DHCPv6)
#   DHCP6-INFO dns=<a,b> domain=<d> up=<s>    (O only: information request)
#   DHCP6-LEASE none up=<s> | DHCP6-INFO none up=<s>    (no reply within 60 s)
#   METADATA source=<config-drive|http> uuid=<uuid> hostname=<h> up=<s>
#   METADATA error=<what> up=<s>
#   HOSTNAME <name> source=<metadata|dhcp>    (cloud-init: the short name)
#   SSH-KEY n=<count>                         (/root/.ssh/authorized_keys)
#   USER-DATA rc=<rc> | USER-DATA none | USER-DATA skipped=not-a-script
#   SSHD up port=22 | SSHD error=<what>       (dropbear, key auth only)
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
mkdir -p /run/md /run/net /root /etc/dropbear /dev/pts
mount -t devpts devpts /dev/pts 2>/dev/null

# --- OpenStack config drive (LABEL=config-2, iso9660 or vfat)
# json_get FILE KEY: the string value of a top-level key of a JSON object;
# when that value is an object, its string values, one a line (public_keys).
# Escapes \n \t \" \\ \/ are decoded (\uXXXX becomes "?").
json_get() {
    awk -v want="$2" '
    BEGIN { RS = "\001" }
    {
        s = $0; n = length(s); depth = 0; i = 1; key = ""; expect_val = 0
        inwant = 0; k2 = 0
        while (i <= n) {
            c = substr(s, i, 1)
            if (c == "\"") {
                str = ""; i++
                while (i <= n) {
                    c = substr(s, i, 1)
                    if (c == "\\") {
                        e = substr(s, i + 1, 1)
                        if (e == "n") str = str "\n"
                        else if (e == "t") str = str "\t"
                        else if (e == "u") { str = str "?"; i += 4 }
                        else str = str e
                        i += 2; continue
                    }
                    if (c == "\"") break
                    str = str c; i++
                }
                if (depth == 1 && expect_val) {
                    if (key == want) { print str; exit }
                    expect_val = 0; key = ""
                } else if (depth == 1) {
                    key = str
                } else if (depth == 2 && inwant) {
                    if (k2) { print str; k2 = 0 } else k2 = 1
                }
            } else if (c == ":" && depth == 1) {
                expect_val = 1
            } else if (c == "," && depth == 1) {
                expect_val = 0; key = ""
            } else if (c == "," && depth == 2) {
                k2 = 0
            } else if (c == "{" || c == "[") {
                depth++
                if (depth == 2 && expect_val && key == want && c == "{") inwant = 1
                if (depth > 1) expect_val = 0
            } else if (c == "}" || c == "]") {
                if (depth == 2 && inwant) exit
                depth--
            }
            i++
        }
    }' "$1"
}

# --- the network job: DHCP on eth0, metadata, then what cloud-init does
uptime_s() { read -r up _ </proc/uptime; }
# wait_for FILE SECONDS: until FILE exists and is non-empty (or, with -e,
# exists), at most SECONDS of uptime (not a count of sleeps: they stretch
# when the host is busy)
wait_for() {
    local t=-s
    [ "$1" = -e ] && { t=-e; shift; }
    read -r up _ </proc/uptime
    local end=$((${up%.*} + $2))
    while [ ! $t "$1" ]; do
        read -r up _ </proc/uptime
        [ "${up%.*}" -ge "$end" ] && return 1
        sleep 0.1
    done
}
MD_URL=http://169.254.169.254/openstack/latest
# fetch NAME: GET $MD_URL/NAME into /run/md/NAME. busybox wget segfaults
# with -T, hence timeout(1). 0 ok, 1 error (404 included).
fetch() {
    rm -f "/run/md/$1.part"
    timeout 5 wget -q -O "/run/md/$1.part" "$MD_URL/$1" 2>/run/md/wget.err &&
        mv "/run/md/$1.part" "/run/md/$1"
}
net_metadata() {    # -> /run/md/meta_data.json (+ user_data), its source
    local i t
    # the config drive is looked for first, as cloud-init does; its device
    # (cdrom or virtio disk) is there before eth0 has a lease, so with a
    # lease the lookup's 10 s timeout is not waited for (3 s at most)
    if [ -s /run/net/lease ]; then
        wait_for -e /run/md/cd.done 3
    else
        wait_for -e /run/md/cd.done 30
    fi
    if [ -s /run/md/meta_data.json ]; then
        src=config-drive
        return 0
    fi
    src=http
    if [ ! -s /run/net/lease ]; then
        mderr=no-lease
        return 1
    fi
    # the proxy may come a little after the lease: retry for ~40 s
    i=0
    while [ $i -lt 20 ]; do
        fetch meta_data.json && break
        i=$((i + 1))
        sleep 1
    done
    if [ ! -s /run/md/meta_data.json ]; then
        t=$(tr '\n' ' ' </run/md/wget.err 2>/dev/null | tr -s ' ' '_')
        mderr=${t:-timeout}
        return 1
    fi
    fetch user_data || rm -f /run/md/user_data    # 404 when there is none
    return 0
}
net_cloud_init() {
    local md=/run/md/meta_data.json hn n rc
    hn=""
    if [ -s $md ]; then
        hn=$(json_get $md hostname)
        hn=${hn%%.*}               # cloud-init sets the short name
        [ -n "$hn" ] && hostname "$hn" && echo "HOSTNAME $hn source=metadata"
    fi
    if [ -z "$hn" ] && [ -s /run/net/dhcp-hostname ]; then
        hn=$(cat /run/net/dhcp-hostname)
        hostname "$hn" && echo "HOSTNAME $hn source=dhcp"
    fi
    if [ -s $md ]; then
        mkdir -p /root/.ssh
        chmod 700 /root /root/.ssh
        json_get $md public_keys | grep -v '^[[:space:]]*$' >/root/.ssh/authorized_keys
        chmod 600 /root/.ssh/authorized_keys
        n=$(grep -c . /root/.ssh/authorized_keys)
        echo "SSH-KEY n=$n"
    fi
    if [ -s /run/md/user_data ]; then
        if [ "$(head -c 2 /run/md/user_data)" = "#!" ]; then
            cp /run/md/user_data /run/user-data
            chmod 700 /run/user-data
            /run/user-data </dev/null
            rc=$?
            echo "USER-DATA rc=$rc"
        else
            echo "USER-DATA skipped=not-a-script"
        fi
    else
        echo "USER-DATA none"
    fi
}
net_sshd() {
    local k=/etc/dropbear/dropbear_ed25519_host_key
    [ -x /usr/sbin/dropbear ] || { echo "SSHD error=no-dropbear"; return; }
    if ! dropbearkey -t ed25519 -f $k >/run/dropbear-key.log 2>&1; then
        echo "SSHD error=dropbearkey-failed"
        return
    fi
    # -s: keys only (no passwords); -F -E: foreground, log to its file
    dropbear -F -E -s -r $k -p 22 -P /run/dropbear.pid </dev/null >/run/dropbear.log 2>&1 &
    local pid=$! i=0
    while [ $i -lt 20 ] && kill -0 $pid 2>/dev/null && ! grep -q "Not backgrounding" /run/dropbear.log; do
        sleep 0.1
        i=$((i + 1))
    done
    if kill -0 $pid 2>/dev/null; then
        echo "SSHD up port=22"
    else
        echo "SSHD error=exited: $(tail -1 /run/dropbear.log)"
    fi
}
# SLAAC: the kernel takes eth0's global address from a router
# advertisement; /proc/net/if_inet6 is "<32 hex> <ifindex> <len> <scope>
# <flags> <dev>", scope 00 global, flag 0x40 tentative (DAD not done).
net6_watch() {
    local hex idx len scope flags dev a end
    mkfifo /tmp/net6.fifo       # the wait: read -t on it (a builtin, no fork)
    exec 4<>/tmp/net6.fifo
    uptime_s
    end=$((${up%.*} + 90))
    while [ "${up%.*}" -lt "$end" ]; do
        while read -r hex idx len scope flags dev; do
            [ "$dev" = eth0 ] && [ "$scope" = 00 ] || continue
            [ $((0x$flags & 0x40)) -eq 0 ] || continue
            a=${hex:0:4}:${hex:4:4}:${hex:8:4}:${hex:12:4}:${hex:16:4}:${hex:20:4}
            a=$a:${hex:24:4}:${hex:28:4}
            uptime_s
            echo "NET6 addr=$a/$((0x$len)) up=$up"
            return
        done </proc/net/if_inet6
        read -t 0.3 -u 4 _
        uptime_s
    done
    uptime_s
    echo "NET6 none up=$up"
}
# DHCPv6 as the router advertisement says: once the kernel has a route
# from an RA (flag RTF_ADDRCONF, 0x40000, in /proc/net/ipv6_route: "<dst>
# <len> <src> <len> <nexthop> <metric> <ref> <use> <flags> <dev>"), rdisc6
# solicits one to read its flags: M (managed) -> dhcpcd's stateful request
# for an address (added as a /128, the prefix being on link by the RA),
# else O (other config) -> an information request (DNS). dhcpcd stays for
# renewals; the kernel keeps router discovery and SLAAC. No RA within 90 s
# (an IPv4-only network): nothing is printed.
net6_dhcp() {
    local d dl s sl nh m rc use fl dev idx scope ll end ra="" managed other router mode what i
    mkfifo /tmp/net6d.fifo
    exec 5<>/tmp/net6d.fifo
    uptime_s
    end=$((${up%.*} + 90))
    while [ -z "$ra" ] && [ "${up%.*}" -lt "$end" ]; do
        while read -r d dl s sl nh m rc use fl dev; do
            [ "$dev" = eth0 ] && [ $((0x$fl & 0x40000)) -ne 0 ] && ra=1 && break
        done </proc/net/ipv6_route
        [ -n "$ra" ] || read -t 0.3 -u 5 _
        uptime_s
    done
    [ -n "$ra" ] || return 0
    # an RA may come while eth0's link-local address is still tentative
    # (DAD): rdisc6 cannot send from it until then
    i=0
    while [ $i -lt 30 ]; do
        ll=""
        while read -r d idx dl scope fl dev; do
            [ "$dev" = eth0 ] && [ "$scope" = 20 ] && [ $((0x$fl & 0x40)) -eq 0 ] && ll=1 && break
        done </proc/net/if_inet6
        [ -n "$ll" ] && break
        read -t 0.2 -u 5 _
        i=$((i + 1))
    done
    i=0
    while [ $i -lt 5 ]; do
        rdisc6 -1 -n -r 3 -w 1500 eth0 >/run/net/ra6 2>&1 && break
        i=$((i + 1))
        read -t 1 -u 5 _
    done
    read -r managed other router <<EOF
$(awk '/^Stateful address conf/ { m = tolower($NF) }
    /^Stateful other conf/ { o = tolower($NF) }
    $1 == "from" { r = $2 }
    END { print (m == "" ? "?" : m), (o == "" ? "?" : o), (r == "" ? "?" : r) }' /run/net/ra6)
EOF
    uptime_s
    if [ "$managed" = "?" ]; then
        echo "RA6 error=$(tail -n 1 /run/net/ra6 | tr -s ' ' _) up=$up"
        return 0
    fi
    echo "RA6 managed=$managed other=$other router=$router up=$up"
    if [ "$managed" = yes ]; then
        mode=--ia_na what=DHCP6-LEASE
    elif [ "$other" = yes ]; then
        mode=--inform6 what=DHCP6-INFO
    else
        return 0
    fi
    mkdir -p /run/dhcpcd /var/lib/dhcpcd
    dhcpcd -B $mode -c /bin/dhcp6-event eth0 </dev/null >/run/dhcpcd.log 2>&1 &
    if ! wait_for /run/net/dhcp6 60; then
        uptime_s
        echo "$what none up=$up"
    fi
}
net_job() {
    local mac
    wait_for -e /sys/class/net/eth0 5
    ip link set lo up
    if [ -e /sys/class/net/eth0 ]; then
        mac=$(cat /sys/class/net/eth0/address)
        ip link set eth0 up
        uptime_s
        echo "NET-START mac=$mac up=$up"
        net6_watch &
        net6_dhcp &
        # -t 30 -T 1: 30 discovers a second apart, then -b: keep trying in
        # the background; a lease later still configures eth0
        udhcpc -i eth0 -s /bin/dhcp-event -O staticroutes -O mtu -O dns -O hostname \
            -O router -O domain -t 30 -T 1 -A 2 -b -p /run/udhcpc.pid \
            >/run/udhcpc.log 2>&1
        if ! wait_for /run/net/lease 60; then
            uptime_s
            echo "DHCP-LEASE none up=$up"
        fi
    else
        echo "NET-START none"
    fi
    if net_metadata; then
        uptime_s
        echo "METADATA source=$src uuid=$(json_get /run/md/meta_data.json uuid)" \
            "hostname=$(json_get /run/md/meta_data.json hostname) up=$up"
    else
        uptime_s
        echo "METADATA error=$mderr up=$up"
    fi
    net_cloud_init
    [ -e /sys/class/net/eth0 ] && net_sshd
}
net_job </dev/null &

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
        cp "$md" /run/md/meta_data.json
        ud=/mnt/config/openstack/latest/user_data
        [ -r "$ud" ] && cp "$ud" /run/md/user_data
        echo config-drive >/run/md/source
    else
        echo "CONFIG-DRIVE dev=$dev error=no-openstack/latest/meta_data.json fs=$fs"
    fi
    umount /mnt/config
fi
: >/run/md/cd.done

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
