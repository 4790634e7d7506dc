#!/usr/bin/env python3
"""Counts the SASS instructions of a kernel's loops in a cubin, without cuobjdump or nvdisasm.

Usage: sass_loop_count.py KERNEL.cubin [NAME_SUBSTRING]
  (cubin from e.g. `nvcc -std=c++17 -O3 -arch=sm_90a -cubin --expt-relaxed-constexpr -Isrc -o k.cubin
  src/nanovllm/backends/cuda/int_gemv_v3.cu`)

For every kernel (.text.<mangled name>) whose name contains NAME_SUBSTRING it prints the number of
instructions, and for each backward branch (a loop) the instructions from its target to the branch
with the counts of the most frequent opcodes. Why a script: the machine that builds has nvcc and
ptxas but no disassembler; sm_70+ instructions are 16 bytes each with the opcode in bits 0..11 of
the first 8 bytes (0x947 BRA, 0x23c HMMA, 0x981 LDG, 0x984 LDS), and BRA's signed offset in 4-byte
units sits in bits 16..23 and 34..81 (checked against small kernels of known loops). The per-tile
figure is a loop's length divided by the tiles one trip handles (the kernel's ring of P tiles).
"""
import collections
import struct
import sys

NAMES = {0x947: "BRA", 0x23C: "HMMA", 0x981: "LDG", 0x984: "LDS", 0x388: "STS", 0x986: "STG", 0x812: "LOP3i",
         0x819: "SHFi", 0x230: "HADD2", 0x223: "FFMA", 0x224: "IMAD", 0x824: "IMADi", 0x20C: "ISETP"}


def sections(path):
    d = open(path, "rb").read()
    if d[:4] != b"\x7fELF" or d[4] != 2:
        sys.exit(f"{path}: not a 64-bit ELF cubin")
    shoff, = struct.unpack_from("<Q", d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * shentsize) for i in range(shnum)]
    base = hdrs[shstrndx][4]
    return {d[base + h[0]:d.index(b"\0", base + h[0])].decode(): d[h[4]:h[4] + h[5]] for h in hdrs}


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    want = sys.argv[2] if len(sys.argv) > 2 else ""
    for name, body in sections(sys.argv[1]).items():
        if not name.startswith(".text.") or want not in name:
            continue
        ins = [struct.unpack_from("<QQ", body, i) for i in range(0, len(body), 16)]
        print(f"{name[6:]}: {len(ins)} instructions")
        for i, (lo, hi) in enumerate(ins):
            if lo & 0xFFF != 0x947:
                continue
            high = ((hi & ((1 << 18) - 1)) << 30) | (lo >> 34)
            if high >> 47:
                high -= 1 << 48
            target = i + 1 + ((high << 8) | ((lo >> 16) & 0xFF)) // 4
            if target < i:  # a loop: target .. i
                ops = collections.Counter(NAMES.get(l & 0xFFF, f"{l & 0xFFF:03x}") for l, _ in ins[target:i + 1])
                top = " ".join(f"{k}:{v}" for k, v in ops.most_common(12))
                print(f"  loop {target}..{i}: {i + 1 - target} instructions ({top})")


if __name__ == "__main__":
    main()
