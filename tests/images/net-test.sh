#!/usr/bin/env bash
# Boot the test guest on a bridge of its own and check its networking
# against a stand-in for Neutron's DHCP namespace: dnsmasq (Neutron's
# hostsfile/optsfile shapes: option 121 with the metadata and default
# routes, MTU, DNS) and a static metadata service on 169.254.169.254:80
# (busybox httpd), both in a namespace; then SSH into the guest with the
# key the metadata gave it. No nubo involved: this tests the image.
#
#   tests/images/net-test.sh [-o OUTDIR] [-n] [-6 stateful|stateless|slaac]
#                                  (default tests/images/out; built if needed)
#
#   -n   no DHCP server: the guest must still boot and beat, and say
#        DHCP-LEASE none and METADATA error=no-lease (~60 s of guest time)
#   -6   also IPv6 on fd00:203::/64: radvd in the namespace (M flag and a
#        prefix that is not autonomous for stateful, O flag and SLAAC for
#        stateless, SLAAC only for slaac) and dnsmasq's DHCPv6 (Neutron's
#        "static" range, a "[addr]" host entry by MAC); the guest must say
#        RA6 with those flags, DHCP6-LEASE with the host entry's address
#        (stateful) or DHCP6-INFO with the DNS server (stateless), NET6
#
# Everything it creates is named nt-guest* / ntguest* (bridge ntguestbr0,
# namespace ntguest-md, veth ntguestv0, tap ntguesttap0, domain
# nubo-ntguest-<pid>) in 203.0.113.32/28, and is removed on exit.
# Env: WAIT=seconds for the guest's lines (default 120), KEEP=1 leaves it up.
set -uo pipefail
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUTDIR=$HERE/out NODHCP=0 V6=""
while getopts o:n6:h opt; do
    case $opt in
    o) OUTDIR=$OPTARG ;;
    n) NODHCP=1 ;;
    6) V6=$OPTARG ;;
    *) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
case $V6 in "" | stateful | stateless | slaac) ;; *) echo "bad -6 $V6" >&2; exit 2 ;; esac
GW6=fd00:203::1 DNS6=fd00:203::53 VMIP6=fd00:203::35
WAIT=${WAIT:-120}
VIRSH=(virsh -q -c qemu:///system)
BR=ntguestbr0 NS=ntguest-md VETH=ntguestv0 NSDEV=ns-ntguest TAP=ntguesttap0
GW=203.0.113.33 DHCPIP=203.0.113.34 VMIP=203.0.113.35 MAC=fa:16:3e:32:00:35
NAME=nubo-ntguest-$$ UUID=$(cat /proc/sys/kernel/random/uuid)
VMHOST=ntguest-vm MTU=1400

log() { printf 'net-test: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

"$HERE/../../scripts/libvirt-up.sh" || die "libvirtd is not available"
"$HERE/build.sh" "$OUTDIR" || die "build.sh failed"

W=$(mktemp -d /tmp/nubo-ntguest.XXXXXX)
chmod 755 "$W"
PIDS=()
cleanup() {
    [ "${KEEP:-0}" = 1 ] && { log "KEEP=1: left up in $W (domain $NAME, netns $NS)"; return; }
    "${VIRSH[@]}" destroy "$NAME" >/dev/null 2>&1
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    [ -s "$W/dnsmasq.pid" ] && kill "$(cat "$W/dnsmasq.pid")" 2>/dev/null
    [ -s "$W/radvd.pid" ] && kill "$(cat "$W/radvd.pid")" 2>/dev/null
    ip link del "$VETH" 2>/dev/null
    ip netns del "$NS" 2>/dev/null
    ip link del "$BR" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------ the "Neutron" side
ip link show "$BR" >/dev/null 2>&1 && die "$BR exists (another run?)"
ip link add "$BR" type bridge stp_state 0 || die "cannot create bridge $BR"
ip link set "$BR" up
ip netns add "$NS" || die "cannot create netns $NS"
ip link add "$VETH" type veth peer name "$NSDEV" netns "$NS"
ip link set "$VETH" master "$BR" up
ip -n "$NS" link set lo up
ip -n "$NS" addr add "$DHCPIP/28" dev "$NSDEV"
ip -n "$NS" addr add 169.254.169.254/32 dev "$NSDEV"
ip -n "$NS" link set "$NSDEV" up

mkdir -p "$W/dhcp" "$W/md/openstack/latest"
chmod 755 "$W/dhcp"
echo "$MAC,host-${VMIP//./-},$VMIP" >"$W/dhcp/host"
cat >"$W/dhcp/opts" <<EOF
tag:subnet0,option:classless-static-route,169.254.169.254/32,$DHCPIP,0.0.0.0/0,$GW
tag:subnet0,249,169.254.169.254/32,$DHCPIP,0.0.0.0/0,$GW
tag:subnet0,option:router,$GW
tag:subnet0,option:dns-server,$DHCPIP
tag:subnet0,option:mtu,$MTU
EOF
RANGE6=()
if [ -n "$V6" ]; then
    # what nubo's agent writes (src/network/agent/dhcp_render.c, radvd.c)
    ip -n "$NS" addr add "$GW6/64" dev "$NSDEV" nodad
    [ "$V6" = stateful ] &&
        echo "$MAC,tag:dhcpv6,host-${VMIP6//:/-}.openstacklocal,[$VMIP6]" >>"$W/dhcp/host"
    printf 'tag:subnet6,option6:dns-server,[%s]\ntag:subnet6,option6:domain-search,openstacklocal\n' \
        "$DNS6" >>"$W/dhcp/opts"
    [ "$V6" = slaac ] || RANGE6=(--dhcp-range=set:subnet6,fd00:203::,static,64,86400s)
    case $V6 in
    stateful) flags="AdvManagedFlag on;" auto=off ;;
    stateless) flags="AdvOtherConfigFlag on;" auto=on ;;
    slaac) flags="" auto=on ;;
    esac
    cat >"$W/radvd.conf" <<EOF
interface $NSDEV {
   AdvSendAdvert on;
   MinRtrAdvInterval 30;
   MaxRtrAdvInterval 100;
   AdvLinkMTU $MTU;
   $flags
   prefix fd00:203::/64 {
        AdvOnLink on;
        AdvAutonomous $auto;
   };
};
EOF
    ip netns exec "$NS" sysctl -q -w net.ipv6.conf.all.forwarding=1
    ip netns exec "$NS" radvd -C "$W/radvd.conf" -p "$W/radvd.pid" -m logfile \
        -l "$W/radvd.log" || die "radvd did not start"
fi
[ "$NODHCP" = 1 ] || ip netns exec "$NS" dnsmasq --no-hosts --no-resolv --port=0 --conf-file=/dev/null \
    --pid-file="$W/dnsmasq.pid" --dhcp-hostsfile="$W/dhcp/host" --dhcp-optsfile="$W/dhcp/opts" \
    --dhcp-leasefile="$W/dhcp/leases" --bind-interfaces --interface="$NSDEV" \
    --except-interface=lo --dhcp-range=set:subnet0,203.0.113.32,static,255.255.255.240,86400s \
    "${RANGE6[@]}" --domain=openstacklocal --log-dhcp --log-facility="$W/dhcp/dnsmasq.log" ||
    die "dnsmasq did not start"

ssh-keygen -q -t ed25519 -N '' -C ntguest@test -f "$W/key" || die "ssh-keygen failed"
KEY=$(cat "$W/key.pub")
cat >"$W/md/openstack/latest/meta_data.json" <<EOF
{"uuid": "$UUID", "name": "$VMHOST", "hostname": "$VMHOST.novalocal",
 "public_keys": {"ntguest": "$KEY\\n"}, "keys": [{"name": "ntguest", "type": "ssh", "data": "$KEY\\n"}],
 "launch_index": 0, "availability_zone": "nova", "project_id": "ntguest"}
EOF
cat >"$W/md/openstack/latest/user_data" <<'EOF'
#!/bin/sh
echo "USERDATA-RAN host=$(hostname) mtu=$(cat /sys/class/net/eth0/mtu)"
exit 3
EOF
ip netns exec "$NS" busybox httpd -f -p 169.254.169.254:80 -h "$W/md" &
PIDS+=($!)

# ---------------------------------------------------------------- the guest
cp "$OUTDIR/guest.qcow2" "$W/base.qcow2"
qemu-img create -q -f qcow2 -F qcow2 -b "$W/base.qcow2" "$W/disk"
CON=$W/console.log
cat >"$W/domain.xml" <<EOF
<domain type='qemu'>
  <name>$NAME</name>
  <uuid>$UUID</uuid>
  <memory unit='MiB'>128</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/></os>
  <features><acpi/><apic/></features>
  <on_poweroff>destroy</on_poweroff>
  <devices>
    <disk type='file' device='disk'><driver name='qemu' type='qcow2'/>
      <source file='$W/disk'/><target dev='vda' bus='virtio'/></disk>
    <interface type='bridge'><mac address='$MAC'/><source bridge='$BR'/>
      <target dev='$TAP'/><model type='virtio'/></interface>
    <serial type='file'><source path='$CON'/><target port='0'/></serial>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
T0=$EPOCHREALTIME
"${VIRSH[@]}" create "$W/domain.xml" >/dev/null || die "virsh create failed"

since() { awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }
# wait_line REGEX: the first console line matching, within WAIT s
wait_line() {
    local deadline=$((SECONDS + WAIT)) l
    while [ $SECONDS -lt $deadline ]; do
        l=$(tr -d '\r' <"$CON" 2>/dev/null | grep -E -m1 "$1") && { echo "$l"; return 0; }
        sleep 0.2
    done
    return 1
}
fails=0
check() {   # name regex
    local l
    if l=$(wait_line "$2"); then
        printf 'ok   %-10s %6ss  %s\n' "$1" "$(since)" "$l"
    else
        printf 'FAIL %-10s no line matching %s\n' "$1" "$2"
        fails=$((fails + 1))
    fi
}
R='[0-9.]+'
if [ "$NODHCP" = 1 ]; then
    check boot      "^GUEST-BOOTED "
    check net-start "^NET-START mac=$MAC up=$R"
    check hb        "^HB 20 "
    check no-lease  "^DHCP-LEASE none up=$R"
    check metadata  "^METADATA error=no-lease up=$R"
    check user-data "^USER-DATA none"
    check hb-after  "^HB [0-9]*[0-9]0 .*" >/dev/null
    l=$(tr -d '\r' <"$CON" | grep -E '^HB ' | tail -1)
    echo "last beat: $l"
    [ "$fails" = 0 ] && echo PASS || echo "FAIL ($fails)"
    [ "$fails" = 0 ]
    exit
fi
check boot      "^GUEST-BOOTED "
check net-start "^NET-START mac=$MAC up=$R"
check lease     "^DHCP-LEASE ip=$VMIP mask=28 router=$GW mtu=$MTU dns=$DHCPIP hostname=host-${VMIP//./-} up=$R"
check net-up    "^NET-UP addr=$VMIP/28 mtu=$MTU routes=.*default via $GW.*169\.254\.169\.254 via $DHCPIP"
check hb        "^HB 5 "
check metadata  "^METADATA source=http uuid=$UUID hostname=$VMHOST\.novalocal up=$R"
check hostname  "^HOSTNAME $VMHOST source=metadata$"
check ssh-key   "^SSH-KEY n=1$"
check userdata  "^USERDATA-RAN host=$VMHOST mtu=$MTU$"
check user-rc   "^USER-DATA rc=3$"
check sshd      "^SSHD up port=22$"
case $V6 in
stateful)
    check ra6    "^RA6 managed=yes other=no router=fe80::\S+ up=$R"
    check dhcp6  "^DHCP6-LEASE addr=$VMIP6 dns=$DNS6 domain=openstacklocal up=$R"
    check net6   "^NET6 addr=fd00:0203:0000:0000:0000:0000:0000:0035/128 up=$R" ;;
stateless)
    check ra6    "^RA6 managed=no other=yes router=fe80::\S+ up=$R"
    check dhcp6  "^DHCP6-INFO dns=$DNS6 domain=openstacklocal up=$R"
    check net6   "^NET6 addr=fd00:0203:0000:0000:f816:3eff:fe32:0035/64 up=$R" ;;
slaac)
    check ra6    "^RA6 managed=no other=no router=fe80::\S+ up=$R"
    check net6   "^NET6 addr=fd00:0203:0000:0000:f816:3eff:fe32:0035/64 up=$R" ;;
esac
out=""
for i in 1 2 3 4 5 6 7 8 9 10; do
    out=$(ip netns exec "$NS" ssh -i "$W/key" -o BatchMode=yes -o StrictHostKeyChecking=no \
        -o UserKnownHostsFile=/dev/null -o ConnectTimeout=10 -o LogLevel=ERROR \
        root@$VMIP 'echo SSH-OK $(hostname) $(id -u); ip -4 route show default' 2>&1) && break
    sleep 1
done
if [[ $out == "SSH-OK $VMHOST 0"*"default via $GW"* ]]; then
    printf 'ok   %-10s %6ss  %s\n' ssh "$(since)" "$(echo "$out" | tr '\n' ' ')"
else
    printf 'FAIL %-10s %s\n' ssh "$out"
    fails=$((fails + 1))
fi
if [ -n "$V6" ]; then      # DHCPv6's DNS server in resolv.conf; the router answers
    want=1
    [ "$V6" = slaac ] && want=0
    out=$(ip netns exec "$NS" ssh -i "$W/key" -o BatchMode=yes -o StrictHostKeyChecking=no \
        -o UserKnownHostsFile=/dev/null -o ConnectTimeout=10 -o LogLevel=ERROR root@$VMIP \
        "echo dns6=\$(grep -c -x 'nameserver $DNS6' /etc/resolv.conf); ping6 -c 1 -W 5 $GW6 >/dev/null && echo PING6-OK" 2>&1)
    if [[ $out == "dns6=$want"*PING6-OK* ]]; then
        printf 'ok   %-10s %6ss  %s\n' ssh-v6 "$(since)" "$(echo "$out" | tr '\n' ' ')"
    else
        printf 'FAIL %-10s %s\n' ssh-v6 "$out"
        fails=$((fails + 1))
    fi
fi
# a wrong key is refused
if ip netns exec "$NS" ssh -i /dev/null -o BatchMode=yes -o StrictHostKeyChecking=no \
    -o UserKnownHostsFile=/dev/null -o ConnectTimeout=10 -o LogLevel=ERROR \
    -o PubkeyAuthentication=no root@$VMIP true 2>/dev/null; then
    printf 'FAIL %-10s a login without the key was accepted\n' ssh-nokey
    fails=$((fails + 1))
else
    printf 'ok   %-10s refused without the key\n' ssh-nokey
fi
if [ "$fails" != 0 ] || [ "${VERBOSE:-0}" = 1 ]; then
    log "console:"
    tr -d '\r' <"$CON" | grep -v '^HB [0-9]*[1-9] ' | sed 's/^/    /' >&2
    log "dnsmasq log:"; sed 's/^/    /' "$W/dhcp/dnsmasq.log" >&2
fi
echo "$([ $fails = 0 ] && echo PASS || echo "FAIL ($fails)")"
[ "$fails" = 0 ]
