#!/usr/bin/env python3
"""Makes tests/data/quant/gguf_dequantize.bin: random weight blocks of every quant type fak computes,
each with the values the `gguf` Python package's own `gguf.quants.dequantize` gives for them, so
the C++ reference dequantizers (tests/kernels/oracle/ref_quant.h) are checked against a reading of
the formats that is not ours.

Block bytes are uniform random except that each f16 scale field has its top exponent bit cleared
(finite scales); MXFP4 exponent bytes stay below 200 (finite products).

Layout, little-endian, one record per type until the end of the file:
  u32 ggml type id, u32 block count n, u32 block bytes b, u32 block elements e,
  n·b bytes of blocks, then n·e float32 values.

usage: make_quant_fixture.py OUT.bin   (needs `pip install gguf numpy`)
"""
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

# type: (block bytes, block elements, byte offsets of f16 fields)
TYPES = {
    T.Q8_0: (34, 32, [0]), T.Q4_0: (18, 32, [0]), T.Q5_0: (22, 32, [0]),
    T.Q4_1: (20, 32, [0, 2]), T.Q5_1: (24, 32, [0, 2]),
    T.Q2_K: (84, 256, [80, 82]), T.Q3_K: (110, 256, [108]), T.Q4_K: (144, 256, [0, 2]),
    T.Q5_K: (176, 256, [0, 2]), T.Q6_K: (210, 256, [208]),
    T.IQ4_NL: (18, 32, [0]), T.IQ4_XS: (136, 256, [0]), T.MXFP4: (17, 32, []),
}
BLOCKS = 3


def main(out_path):
    rng = np.random.default_rng(20261203)
    out = bytearray()
    for qtype, (nbytes, elems, f16_at) in TYPES.items():
        blocks = rng.integers(0, 256, size=(BLOCKS, nbytes), dtype=np.uint8)
        for at in f16_at:
            blocks[:, at + 1] &= 0xBF
        if qtype == T.MXFP4:
            blocks[:, 0] %= 200
        values = dequantize(blocks.reshape(-1), qtype).astype(np.float32).reshape(-1)
        assert values.size == BLOCKS * elems
        out += struct.pack('<4I', int(qtype), BLOCKS, nbytes, elems)
        out += blocks.tobytes() + values.tobytes()
    with open(out_path, 'wb') as f:
        f.write(out)


if __name__ == '__main__':
    main(sys.argv[1])
