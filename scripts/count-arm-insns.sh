#!/usr/bin/env bash
# Counts the instructions every aarch64 kernel executes per 1,000 multiply-accumulates at
# m = 1, 8 and 128 tokens (scripts/count-arm-insns.py: qemu-user's execution log of
# examples/kernel_probe.rs), times the kernels against the reference under qemu (indicative only),
# and writes docs/arm-instruction-counts.md. There is no ARM hardware here: the counts are
# the measurement, the timings a sanity check. Takes about ten minutes on one core.
# Env: TERN_AARCH64_TARGET_DIR (default target/aarch64).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup-aarch64.sh
. scripts/setup-aarch64.sh

# The weight of every count: 256 rows x 2048 (8 TQ blocks per row).
n=256 k=2048
cargo build -q --release --target "$TRIPLE" --example kernel_probe
probe="$CARGO_TARGET_DIR/$TRIPLE/release/examples/kernel_probe"
[ -x "$probe" ] || { echo "count-arm-insns: no executable $probe" >&2; exit 1; }
items=()
for format in TQ1_0 TQ2_0 BITNET_B1_58; do
    for kernel in bitnet_gemm/neon-i8mm bitnet_gemm/neon-dotprod bitnet_gemv/neon-dotprod bitnet_gemm/neon bitnet_gemv/neon; do
        items+=("$format:$kernel")
    done
done
counts="$(python3 scripts/count-arm-insns.py "$probe" "$n" "$k" "${items[@]}")"

# The same count at commit fb42659 (the row-loop kernels, before issue 14), kept as the
# baseline the targets are stated against.
before='| TQ1_0 | bitnet_gemv/neon-dotprod | 441 | 211 | 170 |
| TQ1_0 | bitnet_gemv/neon | 499 | 353 | 271 |
| TQ2_0 | bitnet_gemv/neon-dotprod | 282 | 191 | 169 |
| TQ2_0 | bitnet_gemv/neon | 341 | 332 | 269 |
| BITNET_B1_58 | bitnet_gemv/neon-dotprod | 328 | 245 | 224 |
| BITNET_B1_58 | bitnet_gemv/neon | 377 | 374 | 312 |'

# Counts at small m from which the GEMMs' min_tokens were chosen (the GEMVs after the GEMVs'
# pair tiles, the GEMMs after i8mm became a micro-tile of the shared GEMM; before that the
# dotprod and plain GEMMs were counted after the panel packer's straight-line
# chunks and `tbl` spread; see the section "Where the GEMMs take over" below):
# TERN_COUNT_M="2 3 4 5 6 7 8 10 12 14 16".
thresholds='| format | kernel | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 10 | 12 | 14 | 16 |
|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
| TQ1_0 | bitnet_gemm/neon-i8mm | 301 | 231 | 174 | 158 | 132 | 126 | 110 | 104 | 94 | 88 | 82 |
| TQ1_0 | bitnet_gemm/neon-dotprod | 312 | 234 | 190 | 167 | 158 | 146 | 137 | 124 | 119 | 111 | 109 |
| TQ1_0 | bitnet_gemv/neon-dotprod | 275 | 322 | 219 | 259 | 237 | 263 | 219 | 230 | 219 | 226 | 219 |
| TQ1_0 | bitnet_gemm/neon | 405 | 339 | 296 | 278 | 259 | 252 | 241 | 230 | 223 | 218 | 214 |
| TQ1_0 | bitnet_gemv/neon | 359 | 400 | 358 | 383 | 357 | 375 | 357 | 357 | 357 | 357 | 357 |
| TQ2_0 | bitnet_gemm/neon-i8mm | 242 | 192 | 144 | 134 | 112 | 109 | 95 | 92 | 84 | 79 | 75 |
| TQ2_0 | bitnet_gemm/neon-dotprod | 249 | 191 | 158 | 142 | 137 | 128 | 122 | 111 | 108 | 102 | 101 |
| TQ2_0 | bitnet_gemv/neon-dotprod | 191 | 216 | 155 | 177 | 167 | 181 | 154 | 161 | 154 | 159 | 154 |
| TQ2_0 | bitnet_gemm/neon | 342 | 297 | 264 | 253 | 238 | 234 | 225 | 218 | 212 | 209 | 206 |
| TQ2_0 | bitnet_gemv/neon | 276 | 295 | 276 | 287 | 275 | 283 | 275 | 275 | 275 | 275 | 275 |
| BITNET_B1_58 | bitnet_gemm/neon-i8mm | 251 | 195 | 146 | 134 | 112 | 108 | 94 | 89 | 81 | 75 | 71 |
| BITNET_B1_58 | bitnet_gemm/neon-dotprod | 264 | 201 | 166 | 147 | 139 | 129 | 122 | 111 | 106 | 100 | 98 |
| BITNET_B1_58 | bitnet_gemv/neon-dotprod | 173 | 193 | 172 | 184 | 171 | 180 | 171 | 171 | 171 | 171 | 171 |
| BITNET_B1_58 | bitnet_gemm/neon | 356 | 301 | 265 | 250 | 235 | 228 | 219 | 210 | 204 | 200 | 197 |
| BITNET_B1_58 | bitnet_gemv/neon | 289 | 301 | 288 | 295 | 288 | 293 | 288 | 287 | 287 | 287 | 287 |
| I2_S | bitnet_gemm/neon-i8mm | 212 | 169 | 127 | 118 | 99 | 97 | 84 | 81 | 74 | 70 | 66 |
| I2_S | bitnet_gemm/neon-dotprod | 223 | 174 | 145 | 131 | 125 | 117 | 112 | 102 | 99 | 95 | 93 |
| I2_S | bitnet_gemv/neon-dotprod | 171 | 191 | 170 | 182 | 169 | 178 | 169 | 169 | 169 | 169 | 169 |
| I2_S | bitnet_gemm/neon | 315 | 274 | 245 | 234 | 221 | 217 | 209 | 202 | 197 | 194 | 192 |
| I2_S | bitnet_gemv/neon | 287 | 299 | 286 | 293 | 286 | 291 | 286 | 285 | 285 | 285 | 285 |
| I2_S_64 | bitnet_gemm/neon-i8mm | 212 | 169 | 127 | 118 | 99 | 96 | 84 | 81 | 74 | 70 | 66 |
| I2_S_64 | bitnet_gemm/neon-dotprod | 224 | 175 | 146 | 131 | 125 | 117 | 112 | 103 | 99 | 95 | 93 |
| I2_S_64 | bitnet_gemv/neon-dotprod | 173 | 193 | 171 | 184 | 171 | 180 | 171 | 171 | 171 | 171 | 171 |
| I2_S_64 | bitnet_gemm/neon | 316 | 274 | 245 | 234 | 221 | 217 | 209 | 202 | 198 | 194 | 192 |
| Q2_0 | bitnet_gemm/neon-i8mm | 334 | 263 | 197 | 183 | 152 | 151 | 132 | 124 | 113 | 106 | 102 |
| Q2_0 | bitnet_gemm/neon-dotprod | 354 | 267 | 218 | 193 | 183 | 170 | 160 | 145 | 139 | 131 | 129 |
| Q2_0 | bitnet_gemv/neon-dotprod | 296 | 321 | 235 | 262 | 255 | 272 | 235 | 247 | 234 | 243 | 234 |
| Q2_0 | bitnet_gemm/neon | 467 | 399 | 346 | 329 | 305 | 299 | 285 | 273 | 265 | 259 | 255 |
| Q2_0 | bitnet_gemv/neon | 362 | 391 | 361 | 378 | 360 | 373 | 360 | 360 | 360 | 360 | 360 |
| I2_S_R4 | bitnet_gemm/neon-i8mm | 427 | 313 | 235 | 205 | 171 | 159 | 139 | 125 | 111 | 101 | 94 |
| I2_S_R4 | bitnet_gemm/neon-dotprod | 430 | 312 | 249 | 214 | 195 | 177 | 164 | 145 | 135 | 125 | 120 |
| I2_S_R4 | bitnet_gemv/neon-dotprod | 199 | 236 | 198 | 220 | 198 | 214 | 197 | 197 | 197 | 197 | 197 |
| I2_S_R4 | bitnet_gemm/neon | 522 | 412 | 349 | 317 | 291 | 277 | 262 | 245 | 233 | 225 | 219 |
| I2_S_R4 | bitnet_gemv/neon | 324 | 351 | 323 | 339 | 323 | 334 | 322 | 322 | 322 | 322 | 322 |'

# Now against the baseline's path of the same name (the i8mm and dotprod GEMMs against the
# dotprod baseline, the plain NEON GEMM against the plain NEON one).
ratios="$(printf '%s\n---\n%s\n' "$before" "$counts" | awk -F'|' '
    /^---/ { after = 1; next }
    {
        for (i = 2; i <= 6; i++) gsub(/ /, "", $i)
        base = $3; sub("bitnet_gemm/neon-(i8mm|dotprod)", "bitnet_gemv/neon-dotprod", base)
        sub("^bitnet_gemm/neon$", "bitnet_gemv/neon", base)
        if (!after) { m1[$2 " " $3] = $4; m128[$2 " " $3] = $6; next }
        key = $2 " " base
        # A GEMM is not chosen for one token.
        one = $3 ~ /gemm/ ? "-" : sprintf("%.2f", $4 / m1[key])
        printf "| %s | %s | %s | %.2f |\n", $2, $3, one, $6 / m128[key]
    }')"

timing="$(QEMU_CPU=max qemu-aarch64 -L / "$probe" timing 2>/dev/null |
    awk '/^TIMING / {
        row[++n] = $0
        if ($3 == "bitnet_gemv/reference") ref[$2] = $4
    }
    END {
        for (i = 1; i <= n; i++) {
            split(row[i], f, " ")
            printf "| %s | %s | %.2f | %.1fx |\n", f[2], f[3], f[4], ref[f[2]] / f[4]
        }
    }')"
[ -n "$timing" ] || { echo "count-arm-insns: kernel_probe timing printed nothing" >&2; exit 1; }

rustc_version="$("$RUSTC" --version)"
qemu_version="$(qemu-aarch64 --version | head -n1)"

cat >docs/arm-instruction-counts.md <<EOF
# aarch64 kernels: instructions per 1,000 multiply-accumulates

Generated by \`scripts/count-arm-insns.sh\` ($rustc_version, release profile, target
\`$TRIPLE\`). There is no ARM hardware in this project's CI, so the kernels are compared
by the instructions they execute, counted by qemu.

## How it is counted

\`scripts/count-arm-insns.py\` runs \`examples/kernel_probe.rs\` under
\`qemu-aarch64 -cpu max -d in_asm,exec,nochain\`: qemu logs each translated block once
and each execution of a block, so the instructions executed are the sum of the executed
blocks' lengths. The probe calls one kernel 1 and 3 times (\`Kernel::run\`: activation
preparation and the kernel, one thread); half the difference is one call, the probe's
setup cancelling out. Weights: $n x $k (8 TQ blocks per row); m = 1, 8 and 128 tokens. A
dependence-free \`sdot\` does 16 MACs (62.5 instructions per 1,000 MACs at best),
\`usmmla\` 32 (31.3).

## tern

| format | kernel | m = 1 | m = 8 | m = 128 |
|---|---|---:|---:|---:|
$counts

\`bitnet_gemm/neon-i8mm\` serves from 3 / 3 / 4 / 3 / 3 / 3 / 5 tokens (TQ1_0 / TQ2_0 /
BITNET_B1_58 / I2_S / I2_S_64 / Q2_0 / I2_S_R4), \`bitnet_gemm/neon-dotprod\` from 3 / 5 / 4 / 3 /
3 / 3 / 5 (on CPUs without i8mm, and below i8mm's thresholds on CPUs with it) and
\`bitnet_gemm/neon\` (plain NEON: Cortex-A53) from 3 / 4 / 4 / 3 / 3 / 4 / 5; the GEMMs' m = 1 column is what they
would cost, not what the dispatcher runs.

## Where the GEMMs take over (\`min_tokens\`)

The same count at small m (\`TERN_COUNT_M="2 3 4 5 6 7 8 10 12 14 16"\` for
\`count-arm-insns.py\`), made when the thresholds were last set and not regenerated here (it
takes three times as long as this script): the GEMV rows after the GEMVs' pair tiles, the
GEMM rows after i8mm became a micro-tile of the shared panel GEMM (with the shared loops'
per-tile seeds and Q2_0's constant block loops, which moved i8mm's thresholds down by up to 4
tokens, Q2_0's dotprod GEMM by 2 and the plain GEMM's by 1). Each GEMM
is preferred from the token count from which it executes fewer instructions, at every m
counted, than the kernel the dispatcher would run otherwise: for i8mm the dotprod GEMV, or
the dotprod GEMM past its own threshold; for the dotprod and plain GEMMs their GEMV. There
is no ARM hardware to time them, so the thresholds rest on instruction counts; the GEMVs'
counts vary with m mod 4 or 2, their token tiles. I2_S_64's plain-NEON GEMV was not
counted: I2_S's stands in (their dotprod GEMV rows agree within 2). BITNET_B1_58's panel
unpack costs more than I2_S's (the dotprod GEMM at m = 2: 265 against 224), so the two
single-scale layouts have different thresholds. I2_S_R4's GEMMs take over later than
I2_S's: the panel packer extracts each row's plane from its group's bytes (four times the
transposed bytes per weight), while the GEMV loads a group's bytes once for four rows. With
the plane chosen at run time (a branch per lane and chunk) they executed 1.4-1.6x these
counts (the dotprod GEMM 662 at m = 2, 222 at m = 8); the packer now takes it from the lane.

$thresholds

## Before issue 14 (the row-loop kernels)

The same count (script and shapes) at commit \`fb42659\`, before the aarch64 kernels moved
onto the tile skeleton, when they ran m > 1 as one row against all tokens:

| format | kernel | m = 1 | m = 8 | m = 128 |
|---|---|---:|---:|---:|
$before

## Against the baseline (after / before, same path; the i8mm and dotprod GEMMs against dotprod, the plain NEON GEMM against plain NEON)

Issue 14's targets: at m = 128, i8mm <= 0.33 and batched dotprod <= 0.5 of the dotprod
baseline; m = 1 no worse (<= 1.00). From 5 to 7 tokens on, a CPU without dotprod runs
\`bitnet_gemm/neon\`, not the plain GEMV's batch tiles.

| format | kernel | m = 1 | m = 128 |
|---|---|---:|---:|
$ratios

What limits the GEMMs at m = 128 (TQ2_0 unless said; counted per basic block with the same
qemu log when this was written, per 1,000 MACs):
- \`neon-i8mm\` (a micro-tile of the shared panel GEMM; TQ1_0 58, TQ2_0 57, BITNET_B1_58 51
  when this was written): the inner loop, 64 \`usmmla\` + 16 \`ldp\` + 5 other instructions
  per 2,048 MACs, 41.5 (\`usmmla\` alone is 31.3); the end of every block, about 4: the
  next block's seeds (a token pair's two loaded into both row lanes), 16 accumulators
  converted and scaled by \`zip\`ped row scales into float sums on the stack; the activation
  packing (\`Packed::new\`: 8-byte groups, summed into seeds as they are copied, about one
  instruction per byte), 3.7 at this shape's 256 rows, which is why TQ1_0 and TQ2_0 execute
  1.04x / 1.04x what the kernel with its own unpack (before) did at m = 128 here, and 0.99x /
  1.00x at 2560 x 2560 (where no format executes more than before; at m = 4 and 8 here
  0.74-0.99x); the panel unpack 2.1 (TQ1_0 about 3.5); the output, \`uzp\`s once per tile and a
  run per token, about 1.
- \`neon-dotprod\` GEMM (TQ1_0 88, TQ2_0 84, BITNET_B1_58 80: TQ2_0 and
  BITNET_B1_58 within the 0.5 target of 85, TQ1_0 3 over it; a variant whose inner loop
  carried its pointers across blocks and wrote TQ output per token counted 85 / 82 / 79,
  but made the AVX-512 TQ GEMM 5-11% slower on an Intel Xeon, and was reverted):
  the inner loop, 80 \`sdot\` + 6 loads + 2 loop instructions per 1,280 MACs, 68.8
  (\`sdot\` alone is 62.5): the weights and activations are read as runs of four vectors,
  one post-incrementing \`ld1\` each, from fixed registers (asm that is not \`pure\`, so that
  LLVM keeps it in order instead of copying them); the block ends (20 accumulators
  converted and scaled into float sums kept in memory, the next block's seeds) about 5;
  \`pack_panel\` about 2.3 (TQ1_0 about 5.5, its digits: a byte-shift \`top_trit\` and a
  \`mul\` by 3 per quad vector), whole blocks unpacked at constant sizes; the activation
  packing (\`Packed::new\`) about 1.7, whole 256-element blocks copied and summed in one
  pass; the output about 1.5.
- \`neon\` GEMM (plain NEON; TQ1_0 191, TQ2_0 188, BITNET_B1_58 180 at m = 128, against the
  plain GEMV's 351 / 267 / 269 and 271 / 269 / 312 before issue 14): the same loop and
  panels, each activation quad broadcast with one \`dup\` per token and \`smlal\` +
  \`smlal2\` into two int16 vectors per row vector and token (8 MACs per instruction
  against \`sdot\`'s 16), folded into int32 (\`saddlp\` + \`addp\`) once per 16 groups,
  before an int16 lane can exceed 16 * 4 * 3 * 128 = 24,576; a 4 x 2 block (16
  accumulator registers) costs 82 instructions per 512 MACs in the inner loop, 160.

At m = 1 the plain NEON GEMV (TQ2_0 337 against 341 before, BITNET_B1_58 323 against 377)
keeps its int16 partial sums over a TQ2_0 block, or over a 64-byte line of a BitNet row,
instead of folding them (\`sadalp\`) after every 16-byte load, and prefetches once per line.
Batch tiles of BITNET_B1_58 fold per load as before (kept across loads, their partial sums
spilled); the dotprod GEMV's m = 8 and 128 (161 and 160, 154 before this change) are the
cost of the shared chunk loop, not yet recovered, and so are the plain GEMV's batch tiles
(TQ1_0 351 at m = 128 against 271); the dispatcher now runs either only for 2 to 4 (TQ) or
6 (BITNET_B1_58) tokens, the GEMMs serving from 5 or 7.

## ggml (\`ggml_vec_dot_tq1_0_q8_K\`, \`ggml_vec_dot_tq2_0_q8_K\`, NEON)

ggml computes a matmul as one \`vec_dot\` per (row, token), unpacking the weights again for
every token, so its cost per MAC is the same at every m. Counted from the source of
\`ggml/src/ggml-cpu/arch/arm64/quants.c\` (llama.cpp), per 256-weight block, with the
rules LLVM applies to such loops: one instruction per intrinsic; \`vget_low\`/\`vget_high\`/
\`vreinterpret\` are free (\`smlal2\` reads the high half); constant vectors are hoisted out
of the loop; adjacent 16-byte loads pair into one \`ldp\`; the redundant mask after a shift
by 6 is dropped; an accumulator zeroed only to be \`vmlal\`'d into becomes an \`smull\`;
\`sumf += d * (float)sumi\` is one \`fmadd\`. This is the block loop only: ggml's
activation quantization (\`quantize_row_q8_K\`) and call overhead come on top, while the
tern figures above include tern's activation preparation. ggml has no BitNet (one scale
per tensor) kernel and no i8mm path for TQ types.

| part of the block loop | TQ2_0 dotprod | TQ2_0 neon | TQ1_0 dotprod | TQ1_0 neon |
|---|---:|---:|---:|---:|
| zero the two accumulators | 2 | 0 | 2 | 0 |
| weight loads (qs, and qh with \`ld1r\`) | 2 | 2 | 3 | 3 |
| digit multiplies (\`mul\` by 3^n) | - | - | 13 | 13 |
| code extraction (\`ushr\`+\`and\`; TQ1_0 \`ushr\`,\`uhadd\`,\`ushr\` per vector) | 24 | 24 | 48 | 48 |
| activation loads (256 bytes, \`ldp\`) | 8 | 8 | 8 | 8 |
| multiply-accumulate (\`sdot\`, or \`smlal\`+\`smlal2\`) | 16 | 32 | 16 | 32 |
| block sums: load \`bsums\`, fold, subtract, horizontal add, \`scvtf\` | 7 | 6 | 7 | 6 |
| scales: \`ldr h\` + \`fcvt\`, load \`y.d\`, \`fmul\`, \`fmadd\` | 5 | 5 | 5 | 5 |
| loop: two pointer increments, \`subs\`, \`b.ne\` | 4 | 4 | 4 | 4 |
| **total per 256 weights** | **68** | **81** | **106** | **119** |
| **per 1,000 MACs, every m** | **266** | **316** | **414** | **465** |

## Timing under qemu (indicative only)

\`QEMU_CPU=max\`, m = 1, 512 x 4096 weights, best of 3 calls, milliseconds per call
($qemu_version on the x86 build host). qemu translates each instruction; it does not
model an ARM core's pipelines, so only the order of magnitude against the reference means
anything.

| format | kernel | ms | speed-up vs reference |
|---|---|---:|---:|
$timing
EOF
echo "count-arm-insns: wrote docs/arm-instruction-counts.md"
