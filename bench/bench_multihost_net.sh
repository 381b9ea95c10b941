#!/usr/bin/env bash
# bench_multihost_net.sh - the cross-host path of a vxlan network built by
# hand in the lab (tests/hosts/hosts.sh), for comparison with the path nubo's
# agents build (tests/e2e/test_multihost_network.py prints the guest-to-guest
# figures through it). On each of host1 and host2: a bridge, vxlan-<VNI>
# (local = the host's address, dstport 4789, nolearning, one all-zero fdb
# entry to the other host, MTU 1450) on it, and a namespace "guest" whose
# veth is on the bridge (10.250.0.N/24, MTU 1450), exactly the devices the
# Linux bridge agent makes for a guest's tap. Measured between the two
# namespaces: ping RTT (200 pings, 10 ms apart) and one TCP stream (socat,
# 256 MiB from /dev/zero); then the same over the underlay alone
# (host1 -> host2, no VXLAN) as the floor.
#
#   bench/bench_multihost_net.sh          (as root; HOSTS_NAME / HOSTS_NET as hosts.sh)
# Leaves nothing: the lab is taken down at the end unless it was up before.
set -euo pipefail
export PATH=$PATH:/usr/sbin:/sbin
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export HOSTS_NAME=${HOSTS_NAME:-nubo-bench} HOSTS_NET=${HOSTS_NET:-198.18.90}
H=(bash "$HERE/../tests/hosts/hosts.sh")
VNI=${VNI:-4001}
MIB=${MIB:-256}
BR=ntbenchbr

was_up=0
"${H[@]}" status 2>/dev/null | grep -q "host2 .*libvirtd=" && was_up=1
[ $was_up = 1 ] || "${H[@]}" up 2 >/dev/null
cleanup() {
    for i in 1 2; do
        "${H[@]}" exec host$i ip netns del ntbench-g 2>/dev/null || true
        "${H[@]}" exec host$i ip link del vxlan-$VNI 2>/dev/null || true
        "${H[@]}" exec host$i ip link del $BR 2>/dev/null || true
    done
    [ $was_up = 1 ] || "${H[@]}" down >/dev/null
}
trap cleanup EXIT

on() { local h=$1; shift; "${H[@]}" exec "$h" "$@"; }
for i in 1 2; do
    h=host$i peer=$HOSTS_NET.$((3 - i))
    on $h ip link add $BR type bridge
    on $h ip link set $BR up
    on $h ip link add vxlan-$VNI type vxlan id $VNI local "$HOSTS_NET.$i" dstport 4789 nolearning
    on $h ip link set vxlan-$VNI mtu 1450 master $BR up
    on $h bridge fdb append 00:00:00:00:00:00 dev vxlan-$VNI dst "$peer"
    on $h ip netns add ntbench-g
    on $h ip link add ntbench-t type veth peer name eth0 netns ntbench-g
    on $h ip link set ntbench-t mtu 1450 master $BR up
    on $h ip -n ntbench-g link set lo up
    on $h ip -n ntbench-g link set eth0 mtu 1450 up
    on $h ip -n ntbench-g addr add 10.250.0.$i/24 dev eth0
done


# $1 label, $2 host1 command prefix, $3 host2 command prefix, $4 host2 address
measure() {
    local label=$1 dst=$4 rtt t0 t1
    read -r -a src <<<"$2"
    read -r -a sink <<<"$3"
    "${src[@]}" busybox ping -c 3 -W 1 "$dst" >/dev/null
    rtt=$("${src[@]}" busybox ping -q -c 200 -i 0.01 "$dst" | tail -1 | sed 's/.*= //')
    "${sink[@]}" timeout 60 socat -u TCP-LISTEN:5901,reuseaddr OPEN:/dev/null &
    local sp=$!
    sleep 0.3
    t0=$(date +%s.%N)
    "${src[@]}" sh -c "dd if=/dev/zero bs=1M count=$MIB 2>/dev/null | socat -u - TCP:$dst:5901"
    wait $sp || true
    t1=$(date +%s.%N)
    printf '%-44s RTT min/avg/max %s, TCP %s MiB in %.2f s = %.0f MB/s\n' "$label" "$rtt" "$MIB" \
        "$(echo "$t1 - $t0" | bc)" "$(echo "$MIB * 1048576 / ($t1 - $t0) / 1000000" | bc -l)"
}

measure "by hand: namespace -> vxlan -> namespace" "${H[*]} exec host1 ip netns exec ntbench-g" \
    "${H[*]} exec host2 ip netns exec ntbench-g" 10.250.0.2
measure "underlay only: host1 -> host2 (no VXLAN)" "${H[*]} exec host1" "${H[*]} exec host2" \
    "$HOSTS_NET.2"
