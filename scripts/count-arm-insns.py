#!/usr/bin/env python3
"""Counts the instructions of the aarch64 kernels' inner loops per 256 weights.

Reads `aarch64-linux-gnu-objdump -d -C --no-show-raw-insn` output on stdin. For each row
kernel (`tern::kernel::arch::aarch64::<path>::<fn>`), finds the loops (backward branches
inside the function), takes the one doing the most multiply-accumulate work, and divides
its instruction count by the weights one iteration consumes: an `sdot` is 16 weights, an
`smull`/`smlal`(2) 8. Prints a markdown table.
"""
import re
import sys

PREFIX = "tern::kernel::arch::aarch64::"
KERNELS = [
    ("TQ1_0", "tq1_0_row", "m = 1"),
    ("TQ2_0", "tq2_0_row", "m = 1"),
    ("BITNET_B1_58", "bitnet_row", "m = 1"),
    ("TQ1_0", "tq1_0_rows", "per extra token (m > 1)"),
    ("TQ2_0", "tq2_0_rows", "per extra token (m > 1)"),
    ("BITNET_B1_58", "bitnet_rows", "per extra token (m > 1)"),
]
PATHS = ["neon", "dotprod"]
MAC_WEIGHTS = {"sdot": 16, "smull": 8, "smull2": 8, "smlal": 8, "smlal2": 8}
BRANCH = re.compile(r"^(b\.\w+|b|cbn?z|tbn?z)$")


def functions(lines):
    funcs, name, body = {}, None, []
    for line in lines:
        m = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if m:
            if name:
                funcs.setdefault(name, body)
            name, body = m.group(1), []
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
        if m and name:
            body.append((int(m.group(1), 16), m.group(2), m.group(3)))
    if name:
        funcs.setdefault(name, body)
    return funcs


def loops(body):
    """(first index, last index) of every backward branch's range."""
    index = {addr: i for i, (addr, _, _) in enumerate(body)}
    found = []
    for i, (addr, op, args) in enumerate(body):
        if BRANCH.match(op):
            m = re.search(r"\b([0-9a-f]+) <", args)
            if m and int(m.group(1), 16) < addr and int(m.group(1), 16) in index:
                found.append((index[int(m.group(1), 16)], i))
    return found


def main_loop(body):
    best = None
    for first, last in loops(body):
        ops = [op for _, op, _ in body[first : last + 1]]
        weights = sum(MAC_WEIGHTS.get(op, 0) for op in ops)
        # The innermost loop with the most weights per iteration.
        key = (weights, -len(ops))
        if weights and (best is None or key > best[0]):
            best = (key, len(ops), weights, ops)
    return best


def main():
    funcs = functions(sys.stdin.read().splitlines())
    print("| format | case | path | loop instructions | weights per iteration | instructions per 256 weights |")
    print("|---|---|---|---:|---:|---:|")
    for fmt, fn, case in KERNELS:
        for path in PATHS:
            name = f"{PREFIX}{path}::{fn}"
            body = funcs.get(name)
            if body is None:
                sys.exit(f"count-arm-insns: symbol {name} not found")
            best = main_loop(body)
            if best is None:
                sys.exit(f"count-arm-insns: no multiply-accumulate loop in {name}")
            _, n, weights, _ = best
            label = "neon-dotprod" if path == "dotprod" else "neon"
            print(f"| {fmt} | {case} | {label} | {n} | {weights} | {n * 256 / weights:.1f} |")


if __name__ == "__main__":
    main()
