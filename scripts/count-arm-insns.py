#!/usr/bin/env python3
"""Counts the aarch64 instructions one kernel call executes, under qemu-user.

Runs examples/kernel_probe.rs (BINARY, built for aarch64) under
`qemu-aarch64 -cpu max` with `-d in_asm,exec,nochain`: qemu logs each translated block's
instructions once and every execution of a block, so the instructions executed are the
sum over executions of each block's length. The probe runs with 1 and with 3 calls; half
the difference is one call (activation preparation and the kernel; the test's setup
cancels out). Prints one markdown row per (format, kernel): instructions per 1,000
multiply-accumulates at m = 1, 8 and 128 tokens, for an N x K weight.

Usage: count-arm-insns.py BINARY N K FORMAT:KERNEL... (env TERN_COUNT_M: the token counts,
default "1 8 128")
"""
import os
import re
import subprocess
import sys

TRACE = re.compile(r"^Trace \d+: \S+ \[[0-9a-f]+/([0-9a-f]+)/")
INSN = re.compile(r"^0x([0-9a-f]+):\s")


def executed(binary, spec):
    env = dict(os.environ, QEMU_CPU="max")
    cmd = ["qemu-aarch64", "-L", "/", "-d", "in_asm,exec,nochain", "-D", "/dev/stdout", binary] + spec.split()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            errors="replace")
    size, total, block, first = {}, 0, 0, None
    for line in proc.stdout:
        m = INSN.match(line)
        if m:
            if first is None:
                first = int(m.group(1), 16)
            block += 1
            continue
        if first is not None and not line.strip():
            size[first], first, block = block, None, 0
            continue
        m = TRACE.match(line)
        if m:
            total += size[int(m.group(1), 16)]
    if proc.wait() != 0:
        sys.exit(f"count-arm-insns: the probe failed: {spec}")
    return total


def main():
    binary, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    for item in sys.argv[4:]:
        fmt, kernel = item.split(":")
        cells = []
        for m in map(int, os.environ.get("TERN_COUNT_M", "1 8 128").split()):
            one, three = (executed(binary, f"{fmt} {kernel} {m} {n} {k} {reps}") for reps in (1, 3))
            per_call = (three - one) / 2
            cells.append(f"{per_call * 1000 / (m * n * k):.0f}")
        print(f"| {fmt} | {kernel} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
