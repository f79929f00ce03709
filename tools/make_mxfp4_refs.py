#!/usr/bin/env python3
"""Make tests/data/mxfp4/mxfp4_gguf_py.bin: MXFP4 blocks and what gguf-py makes of them (Python
tooling, run by hand, never by CI or the tests).

gguf-py (llama.cpp's Python package, gguf/quants.py class MXFP4) is the specification the C++ side is
held to: tests/kernels/cpu/test_mxfp4.cpp checks dequantize_row_mxfp4 bit for bit against the
dequantized values here and quantize_row_mxfp4 byte for byte against the blocks gguf-py's quantizer
writes.

Dequantization cases: every code in both nibbles (qs[j] = j | (15 - j) << 4, so a swapped nibble order
or a shifted table shows) at the edge exponents e = 0, 1 (subnormal scales), 2, 3, 64, 125..130, 200,
252..255 (254 and 255 overflow to infinity for the larger codes), then random blocks.
Quantization cases: Gaussian blocks over many magnitudes, an all-zero block, exact ties between two
levels (a tie takes the lower code), a block past 12 steps (saturates), blocks whose largest |x| is a
power of two or one ulp below it (log2f rounds those up), subnormal values, and values near FLT_MAX.
Blocks whose largest |x| is below 2^-125 are left out: there gguf-py's uint8 cast of a negative
exponent wraps (quantize.cpp says what Glassbox does instead).

File layout (little-endian): u32 num_dequant_blocks, u32 num_quant_blocks, then
  u8  dequant_blocks[num_dequant_blocks][17]
  f32 dequant_values[num_dequant_blocks][32]   gguf.quants.dequantize(dequant_blocks, MXFP4)
  f32 quant_inputs[num_quant_blocks][32]
  u8  quant_blocks[num_quant_blocks][17]       gguf.quants.quantize(quant_inputs, MXFP4)

Usage (the gguf-py of llama.cpp's tree vendored in llama_cpp_python 0.3.36; see make_converted_refs.py):
  /work/venv-conv/bin/python tools/make_mxfp4_refs.py
"""
import importlib.metadata
import os
import struct
import sys

import numpy as np
import gguf
from gguf.quants import MXFP4

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(HERE), "tests", "data", "mxfp4", "mxfp4_gguf_py.bin")
QTYPE = gguf.GGMLQuantizationType.MXFP4


def dequant_blocks(rng):
    blocks = []
    every_code = [j | ((15 - j) << 4) for j in range(16)]
    for e in (0, 1, 2, 3, 64, 125, 126, 127, 128, 129, 130, 200, 252, 253, 254, 255):
        blocks.append(bytes([e] + every_code))
    for _ in range(8):
        blocks.append(bytes([int(rng.integers(100, 156))] + [int(b) for b in rng.integers(0, 256, 16)]))
    return np.frombuffer(b"".join(blocks), dtype=np.uint8).reshape(-1, 17)


def quant_inputs(rng):
    f32 = np.float32
    rows = []
    for s in (1e-30, 1e-3, 0.02, 1.0, 37.0, 1e5, 3e30):
        rows.append(rng.normal(0.0, s, 32))
    rows.append(np.zeros(32))
    # d = 1 (largest |x| 15 -> e = 128): exact ties between neighbouring levels,
    # both signs, zeros of both signs, values past 12 steps, and near-ties.
    ties = [15, 13, 10, 7, 5, 3.5, 2.5, 1.5, 0.5, 0.0, -0.0, -0.5, -1.5, -2.5, -3.5, -5, -7, -10, -13, -15,
            2.5000002, 2.4999998, -6.9999995, 12.5, 11.999999, 0.25, -0.2500001, 9.9999, 4.0, 6.0, 8.0, -12.0]
    rows.append(np.array(ties))
    # largest |x| a power of two, or one ulp below it (log2f rounds up for k = 4, 10, 60, -100).
    for k in (1, 2, 4, 10, 60, -3, -100):
        p = f32(2.0) ** k
        below = np.nextafter(p, f32(0))
        for amax in (p, below):
            row = rng.uniform(-1.0, 1.0, 32).astype(np.float32) * amax
            row[int(rng.integers(0, 32))] = -amax if k % 2 else amax
            rows.append(row)
    # the subnormal scales: largest |x| in [2^-125, 2^-124), subnormal values among them.
    tiny = rng.uniform(-1.0, 1.0, 32).astype(np.float32) * f32(2.0 ** -125)
    tiny[0] = f32(2.0 ** -125)
    tiny[1:6] = [f32(2.0 ** -140), f32(-3 * 2.0 ** -128), f32(2.0 ** -127), f32(-(2.0 ** -149)), f32(1.5 * 2.0 ** -126)]
    rows.append(tiny)
    # near FLT_MAX: e = 252 and, with log2f(FLT_MAX) rounded to 128, e = 253 (levels of 8 and 12 steps overflow).
    big = rng.uniform(-1.0, 1.0, 32).astype(np.float32) * f32(2.0 ** 127)
    rows.append(big)
    top = big.copy()
    top[3] = np.finfo(np.float32).max
    top[4] = -np.finfo(np.float32).max
    rows.append(top)
    out = np.array(rows, dtype=np.float32)
    assert np.all(np.abs(out).max(axis=1)[np.abs(out).max(axis=1) > 0] >= 2.0 ** -125)
    return out


def main():
    rng = np.random.default_rng(20250807)
    dq = dequant_blocks(rng)
    with np.errstate(over="ignore"):
        dq_values = gguf.quants.dequantize(dq, QTYPE).astype(np.float32).reshape(-1, 32)
    qi = quant_inputs(rng)
    with np.errstate(over="ignore", invalid="ignore"):
        qb = gguf.quants.quantize(qi, QTYPE).reshape(-1, 17)
    assert dq.shape == (len(dq), 17) and qb.shape == (len(qi), 17)
    # A self-check of what the C++ test relies on: the table and the scale formula.
    assert MXFP4.kvalues == (0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12)
    for e in (0, 1, 2, 127, 128, 129, 254):
        assert float(MXFP4.e8m0_to_fp32_half(np.array([e], dtype=np.uint8))[0]) == 2.0 ** (e - 128)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "wb") as f:
        f.write(struct.pack("<II", len(dq), len(qi)))
        f.write(dq.tobytes())
        f.write(dq_values.astype("<f4").tobytes())
        f.write(qi.astype("<f4").tobytes())
        f.write(qb.tobytes())
    print(f"{OUT}: {len(dq)} dequantization blocks, {len(qi)} quantization blocks, "
          f"{os.path.getsize(OUT)} bytes (gguf-py {importlib.metadata.version('gguf')}, "
          f"numpy {np.__version__})", file=sys.stderr)


if __name__ == "__main__":
    main()
