#!/bin/busybox sh
# dhcpcd's hook script in the nubo test guest (/bin/dhcp6-event), DHCPv6
# only. dhcpcd has already added a stateful lease's address (as a /128: the
# on-link prefix comes from the RA) when it runs this; dhcpcd exports
# reason, interface, new_dhcp6_ia_na1_ia_addr1.., new_dhcp6_name_servers,
# new_dhcp6_domain_search. Console lines (see guest-init.sh):
#   DHCP6-LEASE addr=<ip6> dns=<a,b> domain=<d> up=<s>   (stateful)
#   DHCP6-INFO dns=<a,b> domain=<d> up=<s>               (stateless)
# The DNS servers go to /etc/resolv.conf after the IPv4 ones (guest-dhcp.sh
# puts /run/net/resolv6 back when it rewrites the file).
say() { echo "$*" >/dev/console; }
resolv6() {
    local d
    : >/run/net/resolv6.new
    for d in $new_dhcp6_domain_search; do echo "search $d" >>/run/net/resolv6.new; done
    for d in $new_dhcp6_name_servers; do echo "nameserver $d" >>/run/net/resolv6.new; done
    mv /run/net/resolv6.new /run/net/resolv6
    touch /etc/resolv.conf
    grep -v -x -F -f /run/net/resolv6 /etc/resolv.conf >/run/net/resolv.tmp
    cat /run/net/resolv6 >>/run/net/resolv.tmp
    mv /run/net/resolv.tmp /etc/resolv.conf
}
case "$reason" in
BOUND6 | RENEW6 | REBIND6 | REBOOT6 | INFORM6)
    resolv6
    dnsl=$(echo $new_dhcp6_name_servers | tr ' ' ',')
    dom=$(echo $new_dhcp6_domain_search | tr ' ' ',')
    read -r up _ </proc/uptime
    if [ "$reason" = INFORM6 ]; then
        say "DHCP6-INFO dns=$dnsl domain=$dom up=$up"
        echo info >/run/net/dhcp6
    else
        addrs=""
        for v in $(set | sed -n 's/^\(new_dhcp6_ia_na[0-9]*_ia_addr[0-9]*\)=.*/\1/p'); do
            eval "addrs=\"\$addrs \$$v\""
        done
        addrs=$(echo $addrs | tr ' ' ',')
        say "DHCP6-LEASE addr=$addrs dns=$dnsl domain=$dom up=$up"
        echo "$addrs" >/run/net/dhcp6
    fi
    ;;
esac
exit 0
