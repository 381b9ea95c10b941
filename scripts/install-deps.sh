#!/usr/bin/env bash
# Installs the Debian 12 packages nubo needs to build, run and test: the
# libvirt driver's libraries, libvirtd and QEMU, RabbitMQ and librabbitmq-c
# for the AMQP bus, and what tests/images/build.sh makes the test guest from.
# Idempotent; apt is only called when something is missing.
# NUBO_WITH_MARIADB=1 adds the MariaDB server and client (tests/db/mariadb.sh
# starts a throwaway server without systemd) and Galera with HAProxy
# (tests/db/galera.sh); libmariadb is always there.
set -euo pipefail
pkgs=(
  build-essential meson ninja-build pkg-config clang clang-format git
  libmicrohttpd-dev libjansson-dev libsqlite3-dev libinih-dev libcmocka-dev
  libssl-dev libcrypt-dev uuid-dev libvirt-dev libxml2-dev libcurl4-openssl-dev librabbitmq-dev
  sqlite3 curl procps openssh-client qemu-utils genisoimage rabbitmq-server
  libvirt-daemon-system libvirt-clients qemu-system-x86
  iproute2 dnsmasq-base radvd nftables conntrack bridge-utils dropbear-bin iputils-ping dhcpcd-base ndisc6
  linux-image-cloud-amd64 busybox-static syslinux syslinux-common mtools dosfstools cpio xz-utils
  python3 python3-pytest python3-pytest-xdist python3-openstackclient python3-osc-placement python3-openstacksdk
  tempest python3-stestr python3-subunit python3-junitxml
  libmariadb-dev
)
if [ "${NUBO_WITH_MARIADB:-0}" = 1 ]; then
  # Debian starts the packaged server where systemd runs; the tests use their own
  pkgs+=(mariadb-server mariadb-client)
  # tests/db/galera.sh: three Galera nodes (state transfer by rsync, whose
  # script finds its listener with ss) behind HAProxy; HAProxy is also the
  # front of the control planes in tests/e2e/test_control_planes_front.py
  pkgs+=(galera-4 rsync haproxy)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
