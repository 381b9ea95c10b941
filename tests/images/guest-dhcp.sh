#!/bin/busybox sh
# udhcpc event script of the nubo test guest (/bin/dhcp-event). busybox
# udhcpc exports interface, ip, mask (prefix length), router, dns,
# hostname, domain, mtu, staticroutes (option 121: "dst/len gw ..."),
# serverid, lease. Console lines (see guest-init.sh):
#   DHCP-LEASE ip=<ip> mask=<len> router=<gw> mtu=<mtu> dns=<a,b> hostname=<h> up=<s>
#   NET-UP addr=<ip/len> mtu=<mtu> routes=<route;route;...> up=<s>
# RFC 3442: when option 121 is present the router option (3) is ignored, so
# the default route must come from option 121 (Neutron puts 0.0.0.0/0 in it).
say() { echo "$*" >/dev/console; }
case "$1" in
deconfig)
    ip -4 addr flush dev "$interface"
    ip link set "$interface" up
    ;;
bound | renew)
    [ -n "$mtu" ] && ip link set "$interface" mtu "$mtu"
    ip -4 addr flush dev "$interface"
    ip -4 route flush dev "$interface" 2>/dev/null
    ip addr add "$ip/${mask:-24}" dev "$interface" 2>/dev/null
    if [ -n "$staticroutes" ]; then
        set -- $staticroutes
        while [ $# -ge 2 ]; do
            if [ "$2" = 0.0.0.0 ]; then         # on-link destination
                ip route replace "$1" dev "$interface"
            else
                ip route replace "$1" via "$2" dev "$interface" onlink
            fi
            shift 2
        done
    elif [ -n "$router" ]; then
        set -- $router
        ip route replace default via "$1" dev "$interface"
    fi
    if [ -n "$dns" ]; then
        : >/etc/resolv.conf
        [ -n "$domain" ] && echo "search $domain" >>/etc/resolv.conf
        for d in $dns; do echo "nameserver $d" >>/etc/resolv.conf; done
        # DHCPv6's servers (guest-dhcp6.sh), after these
        [ -s /run/net/resolv6 ] && cat /run/net/resolv6 >>/etc/resolv.conf
    fi
    if [ -n "$hostname" ]; then
        echo "$hostname" >/run/net/dhcp-hostname
    fi
    read -r up _ </proc/uptime
    dnsl=$(echo $dns | tr ' ' ',')
    rtr=$(echo $router | tr ' ' ',')
    say "DHCP-LEASE ip=$ip mask=$mask router=$rtr mtu=${mtu:-} dns=$dnsl hostname=${hostname:-} up=$up"
    routes=$(ip -4 route show dev "$interface" | sed 's/ *$//' | tr '\n' ';')
    read -r up _ </proc/uptime
    say "NET-UP addr=$ip/$mask mtu=$(cat /sys/class/net/$interface/mtu) routes=${routes%;} up=$up"
    echo "$ip" >/run/net/lease
    ;;
leasefail | nak)
    : ;;
esac
exit 0
