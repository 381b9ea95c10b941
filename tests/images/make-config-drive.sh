#!/usr/bin/env bash
# Make an OpenStack config drive the way Nova does (nova/virt/configdrive.py),
# without mounting anything.
#
#   tests/images/make-config-drive.sh OUT iso|vfat UUID HOSTNAME
#
# Content: openstack/latest/{meta_data,network_data,vendor_data,vendor_data2}.json
# (meta_data.json is one line of JSON, keys in Nova's order).
# iso : genisoimage with Nova's flags, volume label config-2.
# vfat: a sparse 64 MiB file (Nova's CONFIGDRIVESIZE_BYTES), mkfs.vfat -n config-2,
#       files copied in with mcopy instead of Nova's loop mount.
# Env: KEYNAME, KEY (public key put in public_keys/keys; a fixed test key by default)
set -euo pipefail
export LC_ALL=C

usage() { echo "usage: $0 OUT iso|vfat UUID HOSTNAME" >&2; exit 2; }
[ $# -eq 4 ] || usage
out=$1 fmt=$2 uuid=$3 host=$4
case $fmt in iso | vfat) ;; *) usage ;; esac
keyname=${KEYNAME:-nubo-test}
key=${KEY:-"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINuboTestKeyNotARealKey000000000000000000 nubo-test"}

need=(genisoimage)
[ "$fmt" = vfat ] && need=(dosfstools mtools)
miss=()
for p in "${need[@]}"; do
    [[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null) == ii* ]] || miss+=("$p")
done
if [ ${#miss[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${miss[@]}" >/dev/null
fi

json_str() {    # JSON string literal
    local s=$1
    s=${s//\\/\\\\}; s=${s//\"/\\\"}
    s=${s//$'\n'/\\n}; s=${s//$'\r'/\\r}; s=${s//$'\t'/\\t}
    printf '"%s"' "$s"
}

d=$(mktemp -d "${TMPDIR:-/tmp}/nubo-configdrive.XXXXXX")
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/openstack/latest"
{
    printf '{"uuid": %s, "public_keys": {%s: %s}, ' "$(json_str "$uuid")" "$(json_str "$keyname")" "$(json_str "$key")"
    printf '"keys": [{"name": %s, "type": "ssh", "data": %s}], ' "$(json_str "$keyname")" "$(json_str "$key")"
    printf '"hostname": %s, "name": %s, "launch_index": 0, ' "$(json_str "$host")" "$(json_str "$host")"
    printf '"availability_zone": "nova", "project_id": "00000000000000000000000000000000", '
    printf '"devices": [], "dedicated_cpus": []}'
} >"$d/openstack/latest/meta_data.json"
printf '{"links": [], "networks": [], "services": []}' >"$d/openstack/latest/network_data.json"
printf '{}' >"$d/openstack/latest/vendor_data.json"
printf '{}' >"$d/openstack/latest/vendor_data2.json"

mkdir -p "$(dirname "$out")"
rm -f "$out"
case $fmt in
iso)
    # Nova: -o path -ldots -allow-lowercase -allow-multidot -l -publisher P
    #       -quiet -J -r -V config-2 dir
    if ! err=$(genisoimage -o "$out" -ldots -allow-lowercase -allow-multidot -l \
            -publisher "nubo test" -quiet -J -r -V config-2 "$d" 2>&1); then
        echo "$err" >&2; exit 1
    fi ;;
vfat)
    truncate -s 64M "$out"
    mkfs.vfat -n config-2 "$out" >/dev/null 2>&1 || mkfs.vfat -n config-2 "$out"
    MTOOLS_SKIP_CHECK=1 mcopy -s -i "$out" "$d/openstack" ::/ ;;
esac
