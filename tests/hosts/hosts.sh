#!/usr/bin/env bash
# hosts.sh - N simulated hypervisor hosts on one Linux machine, for nubo's
# multi-host tests (live migration) and for anyone trying nubo on one box.
#
# Each host hostN is
#   - a network namespace <name>-hostN whose eth0 (a veth) has 198.51.100.N/24,
#     its peer on a bridge <name>br0 (198.51.100.254/24) in the root namespace:
#     the hosts reach each other and the control plane at 198.51.100.254;
#   - a UTS namespace (host name hostN: the hypervisor hostname) and a
#     private mount namespace in which libvirt's compiled-in paths
#     /etc/libvirt /run/libvirt /var/lib/libvirt /var/log/libvirt
#     /var/cache/libvirt (and /etc/pki with TLS) are bind mounts of
#     $BASE/hostN/*, so it has its own virtlogd + libvirtd (pidfiles in
#     $BASE/hostN, host_uuid set per host, `libvirtd --listen`: TCP 16509 on
#     198.51.100.N, auth none; with HOSTS_TLS=1 also TLS 16514 with a CA and
#     certificates of its own);
#   - its own /run/netns ($BASE/hostN/netns): the qdhcp-/qrouter-
#     namespaces its network agent makes are seen inside the host only, not
#     by the other hosts or the root namespace's `ip netns list`;
#   - $LOCAL (default $BASE/local) overlaid by $BASE/hostN/local: one path,
#     different files on every host ("local disks": the instances_path of a
#     host's agent for block migration), while $SHARED (default
#     $BASE/shared) is the same directory on every host ("NFS").
# The daemons keep the namespaces alive; QEMU processes inherit them, so a
# guest's serial log under the instances path is per host in $LOCAL.
# Post-copy live migration needs userfaultfd in the destination's QEMU,
# which runs as user libvirt-qemu: the kernel grants it to a process
# without CAP_SYS_PTRACE only with vm.unprivileged_userfaultfd = 1 (QEMU
# 7.2 does not use /dev/userfaultfd; its refusal, in the destination's
# QEMU log: "postcopy_ram_supported_by_host: userfaultfd not available:
# Operation not permitted"). So `up` sets the sysctl to 1 when it is 0, as
# an operator permitting post-copy would, and the last lab's `down`
# restores the value it had: the sysctl is the machine's, shared by every
# lab (HOSTS_NAME), so the labs that need it are listed in
# /run/nubo-hosts-userfaultfd (one file per lab naming its $BASE, and
# "was": the value before the first). HOSTS_USERFAULTFD=0 leaves the
# sysctl alone (post-copy then refused unless it is already 1).
# The hosts' bridge is also the VXLAN underlay of their network agents
# (each host's [vxlan] local_ip is its 198.51.100.N): `nubo compute` runs
# the network agent with the libvirt driver, its bridges, vxlan-<vni>
# devices and taps in the host's network namespace, its dnsmasq in qdhcp
# namespaces of the host's /run/netns.
#
# Usage:
#   hosts.sh up N            make host1..hostN (idempotent: running hosts are kept)
#   hosts.sh down            stop every host's agent, domains, daemons, the
#                            processes of its qdhcp/qrouter namespaces (dnsmasq,
#                            metadata proxy); remove those namespaces, the hosts'
#                            namespaces (with their bridges and vxlan devices),
#                            links, bridge and $BASE; vm.unprivileged_userfaultfd
#                            back to its value before `up` once no other lab
#                            needs it (harmless twice)
#   hosts.sh status          one line per host, its daemons and domains
#   hosts.sh start hostN [--no-listen]   (re)start one host's daemons
#   hosts.sh stop hostN      stop one host's libvirtd and virtlogd (by pidfile)
#   hosts.sh exec hostN CMD...           run CMD in hostN's namespaces
#   hosts.sh virsh hostN ARGS...         virsh against hostN's libvirtd
#   hosts.sh agent hostN CONF [ARGS...]  start `nubo compute --config CONF` in
#                            hostN (host name, my_ip, log dir set; pidfile
#                            $BASE/hostN/agent.pid, output agent.out)
#   hosts.sh agent-stop hostN            stop that agent (TERM, then KILL)
#   hosts.sh libvirtd hostN stop|start|restart [--no-listen]   libvirtd
#                            alone (guests and virtlogd stay)
#   hosts.sh cpu-hide hostN MODEL...     hostN's QEMU no longer offers these
#                            CPU models (edits its cached capabilities)
#   hosts.sh cpu-restore hostN           undoes cpu-hide
#   hosts.sh cpu-usable hostN MODEL...   which of these hostN offers now
#   hosts.sh ip hostN | dir hostN | uri hostN   print an address / directory /
#                            the root-namespace URI of its libvirtd
# Env: HOSTS_NAME (default nubo: names of namespaces, bridge, links),
#   HOSTS_BASE (default /var/tmp/$HOSTS_NAME-hosts), HOSTS_NET (default
#   198.51.100, documentation range TEST-NET-2: the machine itself may
#   sit in 192.0.2.0/24), HOSTS_TLS=1 (listen_tls with certificates),
#   NUBO_BIN (default build/nubo of this tree) for `agent`,
#   HOSTS_USERFAULTFD (default 1: `up` sets vm.unprivileged_userfaultfd=1).
set -uo pipefail
export PATH=$PATH:/usr/sbin:/sbin

NAME=${HOSTS_NAME:-nubo}
BASE=${HOSTS_BASE:-/var/tmp/$NAME-hosts}
NET=${HOSTS_NET:-198.51.100}
SHARED=${HOSTS_SHARED:-$BASE/shared}
LOCAL=${HOSTS_LOCAL:-$BASE/local}
BRIDGE=${NAME}br0
GW=$NET.254
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NUBO_BIN=${NUBO_BIN:-$HERE/../../build/nubo}

log() { printf 'hosts: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

UFFD=/proc/sys/vm/unprivileged_userfaultfd
UFFD_LABS=/run/nubo-hosts-userfaultfd

hnum() { [[ $1 =~ ^host([0-9]+)$ ]] || die "not a host name: $1 (host1, host2, ...)"; echo "${BASH_REMATCH[1]}"; }
hns() { echo "$NAME-$1"; }
hip() { echo "$NET.$(hnum "$1")"; }
hveth() { echo "${NAME}-h$(hnum "$1")"; }
huuid() { printf '0f0f0f0f-0000-4000-8000-%012d' "$(hnum "$1")"; }
hdir() { echo "$BASE/$1"; }
hpid() { cat "$(hdir "$1")/libvirtd.pid" 2>/dev/null; }
# virtlogd lives as long as the host: the process whose namespaces are the host's
hanchor() { cat "$(hdir "$1")/virtlogd.pid" 2>/dev/null; }
# a zombie (exited, not reaped: its parent here is often a PID 1 that
# reaps nothing) is not alive
alive() {
    [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null &&
        ! grep -qE '^[0-9]+ \(.*\) [ZX] ' "/proc/$1/stat" 2>/dev/null
}
huri() { echo "qemu+unix:///system?socket=$(hdir "$1")/run/libvirt-sock"; }
hvirsh() { local h=$1; shift; virsh -c "$(huri "$h")" "$@"; }
known_hosts() { local d; for d in "$BASE"/host*; do [ -d "$d" ] && basename "$d"; done | sort -V; }

hexec() {
    local h=$1 p; shift
    p=$(hanchor "$h")
    alive "$p" || die "$h is not running (hosts.sh up)"
    exec nsenter -t "$p" -m -n -u -- "$@"
}

# Stops pid: TERM, then KILL after 5 s.
stop_pid() {
    local p=$1 i
    alive "$p" || return 0
    kill "$p" 2>/dev/null
    for i in $(seq 50); do alive "$p" || return 0; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
}

net_up() {
    local n=$1 i h ns
    if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
        ip link add "$BRIDGE" type bridge || die "cannot create bridge $BRIDGE"
    fi
    ip addr replace "$GW/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    for i in $(seq "$n"); do
        h=host$i ns=$(hns "$h")
        ip netns list | grep -qw "$ns" || ip netns add "$ns" || die "cannot create netns $ns"
        ip -n "$ns" link set lo up
        if ! ip -n "$ns" link show eth0 >/dev/null 2>&1; then
            ip link del "$(hveth "$h")" 2>/dev/null
            ip link add "$(hveth "$h")" type veth peer name "$NAME-p$i" &&
                ip link set "$NAME-p$i" netns "$ns" &&
                ip -n "$ns" link set "$NAME-p$i" name eth0 || die "cannot create the link of $h"
        fi
        ip link set "$(hveth "$h")" master "$BRIDGE" up
        ip -n "$ns" addr replace "$(hip "$h")/24" dev eth0
        ip -n "$ns" link set eth0 up
    done
}

# A CA and, per host, a server and client certificate ($BASE/pki/*; P-256
# keys: RSA key generation costs seconds), for
# HOSTS_TLS=1: laid out as libvirt and QEMU look for them under /etc/pki.
make_certs() {
    local h=$1 d ca=$BASE/pki
    d=$(hdir "$h")/pki
    mkdir -p "$ca"
    if [ ! -f "$ca/cacert.pem" ]; then
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 -subj "/CN=$NAME hosts CA" \
            -keyout "$ca/cakey.pem" -out "$ca/cacert.pem" >/dev/null 2>&1 || die "openssl CA failed"
    fi
    [ -f "$d/libvirt/servercert.pem" ] && return 0
    mkdir -p "$d/CA" "$d/libvirt/private" "$d/qemu"
    cp "$ca/cacert.pem" "$d/CA/cacert.pem"
    local ext="subjectAltName=IP:$(hip "$h")"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$(hip "$h")" -keyout "$d/libvirt/private/serverkey.pem" \
        -out "$d/server.csr" >/dev/null 2>&1 &&
        openssl x509 -req -in "$d/server.csr" -CA "$ca/cacert.pem" -CAkey "$ca/cakey.pem" \
            -CAcreateserial -days 30 -extfile <(echo "$ext") -out "$d/libvirt/servercert.pem" \
            >/dev/null 2>&1 || die "openssl server certificate of $h failed"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$(hip "$h")" -keyout "$d/libvirt/private/clientkey.pem" \
        -out "$d/client.csr" >/dev/null 2>&1 &&
        openssl x509 -req -in "$d/client.csr" -CA "$ca/cacert.pem" -CAkey "$ca/cakey.pem" \
            -CAcreateserial -days 30 -out "$d/libvirt/clientcert.pem" >/dev/null 2>&1 ||
        die "openssl client certificate of $h failed"
    # QEMU's native TLS (live_migration_with_native_tls): /etc/pki/qemu
    cp "$ca/cacert.pem" "$d/qemu/ca-cert.pem"
    cp "$d/libvirt/servercert.pem" "$d/qemu/server-cert.pem"
    cp "$d/libvirt/private/serverkey.pem" "$d/qemu/server-key.pem"
    cp "$d/libvirt/clientcert.pem" "$d/qemu/client-cert.pem"
    cp "$d/libvirt/private/clientkey.pem" "$d/qemu/client-key.pem"
    chmod -R a+rX "$d/qemu" "$d/CA"
    rm -f "$d"/*.csr
}

prepare_dirs() {
    local h=$1 d
    d=$(hdir "$h")
    mkdir -p "$d"/{etc,run,lib,log/qemu,cache,local,netns} "$SHARED" "$LOCAL"
    chmod 755 "$BASE" "$d" "$d/local" "$SHARED" "$LOCAL"
    if [ ! -f "$d/etc/.copied" ]; then
        cp -a /etc/libvirt/. "$d/etc/"
        rm -f "$d"/etc/qemu/networks/autostart/* # no default network / dnsmasq
        rm -f "$d"/etc/qemu/*.xml                # no system domains
        cp -a /var/lib/libvirt/. "$d/lib/" 2>/dev/null
        rm -rf "$d"/lib/qemu/save/* "$d"/lib/qemu/snapshot/* 2>/dev/null
        cp -a /var/cache/libvirt/. "$d/cache/" 2>/dev/null # QEMU capabilities: fast start
        touch "$d/etc/.copied"
    fi
    local tls=0
    if [ "${HOSTS_TLS:-0}" = 1 ]; then
        tls=1
        make_certs "$h"
    fi
    {
        echo "listen_tls = $tls"
        echo 'listen_tcp = 1'
        echo "listen_addr = \"$(hip "$h")\""
        echo 'tcp_port = "16509"'
        echo 'tls_port = "16514"'
        echo 'auth_tcp = "none"'
        echo 'auth_tls = "none"'
        echo "host_uuid = \"$(huuid "$h")\"" # no SMBIOS inside the netns: set it explicitly
        echo 'log_filters = "1:qemu.qemu_migration"'
        echo 'log_outputs = "3:file:/var/log/libvirt/libvirtd.log"'
    } >"$d/etc/libvirtd.conf"
    # QEMU's native TLS certificates live under the host's /etc/pki
    [ -f "$d/etc/qemu.conf.orig" ] || cp "$d/etc/qemu.conf" "$d/etc/qemu.conf.orig"
    cp "$d/etc/qemu.conf.orig" "$d/etc/qemu.conf"
    [ $tls = 1 ] && echo 'default_tls_x509_cert_dir = "/etc/pki/qemu"' >>"$d/etc/qemu.conf"
    return 0
}

start_host() {
    local h=$1 listen=--listen d pki=""
    [ "${2:-}" = --no-listen ] && listen=""
    d=$(hdir "$h")
    if alive "$(hpid "$h")"; then
        log "$h: libvirtd already running (pid $(hpid "$h"))"
        return 0
    fi
    prepare_dirs "$h"
    if [ -d "$d/pki" ]; then
        # /etc/pki must exist to be a mount point; made once, removed by down
        [ -d /etc/pki ] || { mkdir /etc/pki && touch "$BASE/.made-etc-pki"; }
        pki="mount --bind $d/pki /etc/pki"
    fi
    rm -f "$d/libvirtd.pid" "$d/virtlogd.pid" "$d/run/libvirt-sock"
    ip netns exec "$(hns "$h")" unshare --mount --uts --propagation private -- /bin/bash -ec "
        hostname $h
        mount --bind $d/etc   /etc/libvirt
        mount --bind $d/run   /run/libvirt
        mount --bind $d/lib   /var/lib/libvirt
        mount --bind $d/log   /var/log/libvirt
        mount --bind $d/cache /var/cache/libvirt
        mount --bind $d/local $LOCAL
        mount --bind $d/netns /run/netns
        mount --make-shared /run/netns
        $pki
        virtlogd -d -p $d/virtlogd.pid
        libvirtd -d $listen -p $d/libvirtd.pid" || die "$h: cannot start its daemons"
    local i
    for i in $(seq 100); do
        [ -S "$d/run/libvirt-sock" ] && hvirsh "$h" uri >/dev/null 2>&1 && break
        sleep 0.1
    done
    if ! hvirsh "$h" uri >/dev/null 2>&1; then
        stop_host "$h"
        die "$h: libvirtd does not answer: $(grep -m1 'error : virStateInitialize\|error : daemon' "$d/log/libvirtd.log")"
    fi
    log "$h: netns $(hns "$h") ip $(hip "$h") libvirtd pid $(hpid "$h")${listen:+ listening on tcp/16509}"
}

# libvirtd alone, in the host's namespaces: guests (QEMU) and virtlogd stay.
libvirtd_ctl() {
    local h=$1 what=$2 d listen=--listen i
    d=$(hdir "$h")
    [ "${3:-}" = --no-listen ] && listen=""
    alive "$(hanchor "$h")" || die "$h is not running (hosts.sh up)"
    case $what in
    stop) stop_pid "$(hpid "$h")"; rm -f "$d/libvirtd.pid" ;;
    start)
        alive "$(hpid "$h")" && return 0
        prepare_dirs "$h"
        nsenter -t "$(hanchor "$h")" -m -n -u -- libvirtd -d $listen -p "$d/libvirtd.pid" ||
            die "$h: libvirtd did not start"
        for i in $(seq 100); do hvirsh "$h" uri >/dev/null 2>&1 && return 0; sleep 0.1; done
        die "$h: libvirtd does not answer" ;;
    restart) libvirtd_ctl "$h" stop && libvirtd_ctl "$h" start "${3:-}" ;;
    *) die "libvirtd hostN stop|start|restart [--no-listen]" ;;
    esac
}

# The models of "$@" hostN's libvirtd still lists as usable under TCG.
cpu_usable() {
    local h=$1 m caps out=""
    shift
    caps=$(hvirsh "$h" domcapabilities --virttype qemu --arch x86_64 --machine pc) || return 1
    for m in "$@"; do
        grep -q "<model usable='yes'[^>]*>$m</model>" <<<"$caps" && out="$out $m"
    done
    echo "$out"
}

# Makes hostN's QEMU lack CPU models (a host of another CPU generation):
# they are removed from its libvirtd's cached QEMU capabilities, which
# libvirt keeps while it finds the cache fresh; libvirtd restarts, and
# cpu_hide checks that the models are gone (libvirtd may find its cache stale at the restart and
# probe QEMU again: then the fresh cache is edited once more). libvirtd
# can still probe again later (at any lookup that finds the cache stale):
# a caller checks afterwards that the models stayed hidden (cpu-usable).
cpu_hide() {
    local h=$1 m f c try left
    shift
    c=$(hdir "$h")/cache/qemu
    [ -d "$c/capabilities.orig" ] || cp -a "$c/capabilities" "$c/capabilities.orig"
    for try in 1 2 3; do
        for f in "$c"/capabilities/*.xml; do
            [ -f "$f" ] || die "$h has no cached QEMU capabilities"
            for m in "$@"; do
                sed -i -e "/<cpu type='[a-z]*' name='$m' .*\/>\$/d" \
                    -e "/<cpu type='[a-z]*' name='$m' .*[^/]>\$/,/<\/cpu>/d" "$f"
            done
        done
        libvirtd_ctl "$h" restart
        left=$(cpu_usable "$h" "$@") || die "$h: cannot read its domain capabilities"
        [ -z "$left" ] && return 0
        log "$h: libvirtd still offers$left after the restart (cache probed again): hiding again"
    done
    # libvirtd probes QEMU again whenever it finds its cache stale (seen
    # after other tests ran): the caller checks what held
    log "$h: WARNING: libvirtd still offers$left after 3 restarts"
}

cpu_restore() {
    local c
    c=$(hdir "$1")/cache/qemu
    [ -d "$c/capabilities.orig" ] || return 0
    rm -rf "$c/capabilities" && mv "$c/capabilities.orig" "$c/capabilities"
    libvirtd_ctl "$1" restart
}

agent_pid() { cat "$(hdir "$1")/agent.pid" 2>/dev/null; }

agent_stop() {
    local h=$1
    stop_pid "$(agent_pid "$h")"
    rm -f "$(hdir "$h")/agent.pid"
}

# nubo compute for host h with CONF (and extra arguments), in h's namespaces.
agent_start() {
    local h=$1 conf=$2 d p
    shift 2
    d=$(hdir "$h")
    if alive "$(agent_pid "$h")"; then
        log "$h: agent already running (pid $(agent_pid "$h"))"
        return 0
    fi
    p=$(hanchor "$h")
    alive "$p" || die "$h is not running (hosts.sh up)"
    mkdir -p "$d/agent-log"
    # agent.out grows across restarts: only this start's lines count
    local seen
    seen=$(cat "$d/agent.out" 2>/dev/null | wc -l)
    nsenter -t "$p" -m -n -u -- setsid "$NUBO_BIN" compute --config "$conf" \
        --set "DEFAULT.host=$h" --set "DEFAULT.my_ip=$(hip "$h")" \
        --set "DEFAULT.log_dir=$d/agent-log" "$@" >>"$d/agent.out" 2>&1 </dev/null &
    echo $! >"$d/agent.pid"
    local i
    for i in $(seq 300); do
        tail -n +"$((seen + 1))" "$d/agent.out" 2>/dev/null | grep -q 'nubo: ready' && break
        alive "$(agent_pid "$h")" || die "$h: the agent exited: $(tail -5 "$d/agent.out")"
        sleep 0.1
    done
    log "$h: agent pid $(agent_pid "$h"), log $d/agent-log"
}

# The namespaces the host's agent made in its /run/netns: their processes
# (dnsmasq, metadata proxies) killed, the namespaces deleted. From the
# root namespace the files under $BASE/hostN/netns are the mount points
# of the host's own mount namespace.
stop_netns() {
    local h=$1 p ns pid
    p=$(hanchor "$h")
    alive "$p" || return 0
    for ns in $(nsenter -t "$p" -m -n -u -- ip netns list 2>/dev/null | awk '{print $1}'); do
        for pid in $(nsenter -t "$p" -m -n -u -- ip netns pids "$ns" 2>/dev/null); do
            stop_pid "$pid"
        done
        nsenter -t "$p" -m -n -u -- ip netns del "$ns" 2>/dev/null
    done
}

stop_host() {
    local h=$1 d p q dom
    d=$(hdir "$h")
    stop_netns "$h"
    if alive "$(hpid "$h")"; then
        for dom in $(hvirsh "$h" list --name 2>/dev/null); do hvirsh "$h" destroy "$dom" >/dev/null 2>&1; done
        for dom in $(hvirsh "$h" list --all --name 2>/dev/null); do
            hvirsh "$h" undefine --managed-save "$dom" >/dev/null 2>&1
        done
    fi
    for q in "$d"/run/qemu/*.pid; do
        [ -f "$q" ] && p=$(cat "$q") && stop_pid "$p"
    done
    stop_pid "$(hpid "$h")"
    stop_pid "$(cat "$d/virtlogd.pid" 2>/dev/null)"
    rm -f "$d/libvirtd.pid" "$d/virtlogd.pid"
}

# vm.unprivileged_userfaultfd = 1 for this lab (see the header), the
# value before the first lab kept in $UFFD_LABS/was.
uffd_up() {
    [ "${HOSTS_USERFAULTFD:-1}" = 1 ] && [ -f "$UFFD" ] || return 0
    mkdir -p "$UFFD_LABS" || return 0
    (
        flock 9
        [ -f "$UFFD_LABS/was" ] || cat "$UFFD" >"$UFFD_LABS/was"
        echo "$BASE" >"$UFFD_LABS/$NAME"
        if [ "$(cat "$UFFD")" = 0 ]; then
            echo 1 >"$UFFD" || die "cannot set vm.unprivileged_userfaultfd"
            log "vm.unprivileged_userfaultfd = 1 (was 0, until down): post-copy for QEMU as libvirt-qemu"
        fi
    ) 9>"$UFFD_LABS/lock"
}

# This lab no longer needs it: the value before the first lab back when
# no other lab (one whose $BASE still exists) does.
uffd_down() {
    [ -f "$UFFD_LABS/$NAME" ] || return 0
    (
        flock 9
        rm -f "$UFFD_LABS/$NAME"
        for f in "$UFFD_LABS"/*; do
            case ${f##*/} in was | lock | '*') continue ;; esac
            [ -d "$(cat "$f")" ] && exit 0 # another lab is up
            rm -f "$f"
        done
        if [ -f "$UFFD_LABS/was" ]; then
            [ "$(cat "$UFFD")" = "$(cat "$UFFD_LABS/was")" ] ||
                log "vm.unprivileged_userfaultfd = $(cat "$UFFD_LABS/was") again"
            cat "$UFFD_LABS/was" >"$UFFD"
            rm -f "$UFFD_LABS/was"
        fi
    ) 9>"$UFFD_LABS/lock"
}

up() {
    local n=${1:-2} i
    [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "up N: N from 1 to 200"
    for b in libvirtd virtlogd virsh nsenter unshare ip; do
        command -v "$b" >/dev/null || die "no $b"
    done
    [ "$(id -u)" = 0 ] || die "needs root (network and mount namespaces)"
    mkdir -p "$BASE"
    uffd_up
    net_up "$n"
    for i in $(seq "$n"); do start_host "host$i"; done
}

down() {
    local h ns
    for h in $(known_hosts); do
        agent_stop "$h"
        stop_host "$h"
    done
    for ns in $(ip netns list | awk '{print $1}' | grep "^$NAME-host[0-9]*$"); do
        ip netns del "$ns"
    done
    for h in $(ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep "^$NAME-h[0-9]*$"); do
        ip link del "$h" 2>/dev/null
    done
    ip link show "$BRIDGE" >/dev/null 2>&1 && ip link del "$BRIDGE"
    if [ -f "$BASE/.made-etc-pki" ]; then rmdir /etc/pki 2>/dev/null; fi
    # QEMU chowned disks to libvirt-qemu; root removes them all the same
    rm -rf "$BASE"
    uffd_down
    return 0
}

status() {
    local h
    for h in $(known_hosts); do
        local p a
        p=$(hpid "$h")
        a=$(agent_pid "$h")
        if alive "$p"; then
            echo "$h ip=$(hip "$h") netns=$(hns "$h") libvirtd=$p agent=$(alive "$a" && echo "$a" || echo none)" \
                "domains=[$(hvirsh "$h" list --all --name 2>/dev/null | xargs echo)]"
        else
            echo "$h ip=$(hip "$h") DOWN"
        fi
    done
}

cmd=${1:-}
shift || true
case $cmd in
up) up "${1:-2}" ;;
down | teardown) down ;;
status) status ;;
start) hnum "$1" >/dev/null && start_host "$1" "${2:-}" ;;
stop) hnum "$1" >/dev/null && stop_host "$1" ;;
exec) h=$1; shift; hexec "$h" "$@" ;;
virsh) h=$1; shift; hvirsh "$h" "$@" ;;
agent) h=$1; c=$2; shift 2; agent_start "$h" "$c" "$@" ;;
agent-stop) agent_stop "$1" ;;
libvirtd) libvirtd_ctl "$@" ;;
cpu-hide) h=$1; shift; cpu_hide "$h" "$@" ;;
cpu-restore) cpu_restore "$1" ;;
cpu-usable) h=$1; shift; cpu_usable "$h" "$@" ;;
ip) hip "$1" ;;
dir) hdir "$1" ;;
uri) huri "$1" ;;
*) sed -n '2,74p' "$0"; exit 2 ;;
esac
