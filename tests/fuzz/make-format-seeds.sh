#!/usr/bin/env bash
# Writes a seed corpus for fuzz_format into DIR: images of every format made
# with qemu-img (and an ISO), encoded in the target's "sparse" input mode
# (segments of non-zero bytes), plus the first 4 KiB of each in "flat" mode.
# Usage: tests/fuzz/make-format-seeds.sh DIR
set -euo pipefail
out=${1:?usage: $0 DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
qemu-img create -q -f qcow2 -o compat=0.10 q2.qcow2 64M
qemu-img create -q -f qcow2 -o compat=1.1 q3.qcow2 64M
qemu-img create -q -f qcow2 -b /etc/passwd -F raw backing.qcow2
qemu-img create -q -f qcow2 -o data_file="$work/data.raw" datafile.qcow2 16M
qemu-img create -q -f vmdk ms.vmdk 64M
qemu-img create -q -f vmdk -o subformat=streamOptimized so.vmdk 64M
qemu-img create -q -f vmdk -o subformat=monolithicFlat mf.vmdk 1M
qemu-img create -q -f vpc dyn.vhd 64M
qemu-img create -q -f vhdx x.vhdx 64M
qemu-img create -q -f vdi x.vdi 64M
qemu-img create -q -f qed x.qed 64M
qemu-img create -q -f qcow x.qcow 64M
mkdir iso && echo seed >iso/a
if command -v genisoimage >/dev/null; then genisoimage -quiet -o x.iso iso
else xorriso -as mkisofs -quiet -o x.iso iso; fi
head -c 8K /dev/urandom >data3.raw && truncate -s 1M data3.raw
qemu-img convert -O vmdk -o subformat=streamOptimized data3.raw so3.vmdk
# Hand-made variants QEMU does not write: a parent hint, a zero-capacity
# header over a FLAT extent, a grain directory "at end" with its footer.
/usr/bin/python3 - <<'PY'
import struct
ms = bytearray(open("ms.vmdk", "rb").read())
desc = bytes(ms[512:512 + 10240]).rstrip(b"\0").replace(
    b"parentCID=ffffffff", b'parentCID=1\nparentFileNameHint="/etc/passwd"')
ph = bytearray(ms); ph[512:512 + 10240] = desc.ljust(10240, b"\0")
open("parent.vmdk", "wb").write(ph)
zc = bytearray(ms); zc[12:20] = struct.pack("<Q", 0)
flat = b'version=1\nCID=1\nparentCID=ffffffff\ncreateType="monolithicFlat"\nRW 2048 FLAT "/etc/passwd" 0\n'
zc[512:512 + 10240] = flat.ljust(10240, b"\0")
open("zerocap.vmdk", "wb").write(zc)
so = bytearray(open("so3.vmdk", "rb").read()); so += b"\0" * (-len(so) % 512)
hdr = bytes(so[:512]); so[56:64] = struct.pack("<Q", 2**64 - 1)
so += struct.pack("<QII", 0, 0, 3).ljust(512, b"\0") + hdr + b"\0" * 512
open("gdend.vmdk", "wb").write(so)
PY
/usr/bin/python3 - "$out" parent.vmdk zerocap.vmdk gdend.vmdk q2.qcow2 q3.qcow2 backing.qcow2 datafile.qcow2 ms.vmdk so.vmdk \
    mf.vmdk dyn.vhd x.vhdx x.vdi x.qed x.qcow x.iso <<'PY'
import struct, sys
out, files = sys.argv[1], sys.argv[2:]
LIMIT = 4 * 1024 * 1024
for name in files:
    data = open(name, "rb").read()[:LIMIT]
    seed = bytearray([1])
    i = 0
    while i < len(data):
        if data[i] == 0:
            i += 1
            continue
        j = i
        while j < len(data) and j - i < 65535 and any(data[j:j + 64]):
            j += 64
        j = min(j, len(data), i + 65535)
        seed += struct.pack("<IH", i, j - i) + data[i:j]
        i = j
    # Keep the file length: a zero byte at the very end.
    seed += struct.pack("<IH", len(data) - 1, 1) + data[-1:]
    open(f"{out}/sparse-{name}", "wb").write(seed)
    open(f"{out}/flat-{name}", "wb").write(bytes([0]) + data[:4096])
PY
echo "seeds written to $out"
