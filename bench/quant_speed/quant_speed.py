"""The issue-32 speed table: fak against llama.cpp per quant type and architecture, same GGUF files.

For every (architecture, quant type): a random-weight GGUF of one real shape (generated once under
--work, quantized by llama.cpp's own quantizer with `pure` set, so every matrix has the type;
MXFP4 by the gguf package, which llama.cpp's quantizer makes only for MoE experts), then rounds of
fak prefill/decode and llama.cpp prefill/decode interleaved (fak, llama.cpp, fak, ...), each engine
in its own process with the same thread count. Prints a markdown table of medians and fak ÷ llama.cpp.

llama.cpp runs through llama-cpp-python (the oracle venv's libllama and ggml: llama-bench itself is
not on PyPI), timed as llama-bench times: pp = one batch of N random tokens into an empty cache,
tg = N single-token decodes, after a short warm-up that pages the weights in. Its CPU backend's
runtime weight repacking is on (its default) unless it crashes (llama-cpp-python 0.3.36 on Sapphire
Rapids), then off, and the row says so. fak runs `fak_logits_dump bench` (the same two cases).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "llama_cpp_oracle"))

import gguf_models as gm  # noqa: E402
import oracle  # noqa: E402

# TinyLlama-1.1B's widths: rows of 2048 and 5632, so the 256-element K-quants apply to every matrix
# (SmolLM2-135M's 576-wide rows would make llama.cpp fall back to 32-element types).
TINYLLAMA = gm.Shape("llama", 2048, 22, 32, 4, 64, 5632, 32000, tied=False)
SHAPES = {
    "llama": TINYLLAMA,
    "qwen3": dataclasses.replace(TINYLLAMA, arch="qwen3", rope_base=1e6),
    "gemma3": dataclasses.replace(TINYLLAMA, arch="gemma3", tied=True, sliding_window=512, rope_base=1e6),
}
# kind -> (llama.cpp ftype that `pure` turns into this one type, label)
KINDS = {
    "q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0", "q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0", "q4_1": "LLAMA_FTYPE_MOSTLY_Q4_1",
    "q5_0": "LLAMA_FTYPE_MOSTLY_Q5_0", "q5_1": "LLAMA_FTYPE_MOSTLY_Q5_1", "q2_k": "LLAMA_FTYPE_MOSTLY_Q2_K",
    "q3_k": "LLAMA_FTYPE_MOSTLY_Q3_K_S", "q4_k": "LLAMA_FTYPE_MOSTLY_Q4_K_S", "q5_k": "LLAMA_FTYPE_MOSTLY_Q5_K_S",
    "q6_k": "LLAMA_FTYPE_MOSTLY_Q6_K", "iq4_nl": "LLAMA_FTYPE_MOSTLY_IQ4_NL", "iq4_xs": "LLAMA_FTYPE_MOSTLY_IQ4_XS",
    "f16": "LLAMA_FTYPE_MOSTLY_F16", "bf16": "LLAMA_FTYPE_MOSTLY_BF16", "mxfp4": None,
}


def quantize_pure(src: str, dst: str, kind: str, threads: int) -> None:
    """llama.cpp's quantizer with `pure`: every tensor of two or more dimensions to the one type."""
    import ctypes

    import llama_cpp
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, KINDS[kind])
    params.nthread = threads
    params.pure = True
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params))
    if rc != 0 or not os.path.exists(dst):
        raise RuntimeError(f"llama_model_quantize({src} -> {dst}, {kind}, pure) failed: {rc}")


def model_file(work: str, arch: str, shape: gm.Shape, kind: str, threads: int) -> str:
    name = f"{arch}_h{shape.hidden}_L{shape.layers}"
    out = os.path.join(work, f"{name}_{kind}.gguf")
    if os.path.exists(out):
        return out
    if KINDS[kind] is None:  # the gguf package's quantizer (oracle.make_model knows the kind)
        return oracle.make_model(work, name, shape, 7, kind)
    base = oracle.make_model(work, name, shape, 7, "f32")
    t0 = time.time()
    quantize_pure(base, out + ".tmp", kind, threads)
    os.replace(out + ".tmp", out)
    print(f"  quantized {os.path.basename(out)} ({os.path.getsize(out) / 1e6:.0f} MB, {time.time() - t0:.0f} s) "
          f"{gm.tensor_types(out)}", file=sys.stderr, flush=True)
    return out


def fak_round(tool: str, path: str, threads: int, pp: int, tg: int) -> dict:
    return oracle.fak_bench(tool, path, threads, [pp], tg, warmup=0)


def llama_round(path: str, threads: int, pp: int, tg: int, repack: bool) -> dict:
    """One llama.cpp round in a child process (a crash in ggml loses one try, not the run)."""
    code = ("import json, sys; sys.path.insert(0, %r); from quant_speed import llama_worker; "
            "print(json.dumps(llama_worker(%r, %d, %d, %d, %r)))" % (HERE, path, threads, pp, tg, repack))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"llama.cpp on {path}: exit {res.returncode}: {res.stderr.strip()[-300:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def llama_worker(path: str, threads: int, pp: int, tg: int, repack: bool) -> dict:
    import llama_cpp.llama as llama_module
    from llama_cpp import Llama
    if not repack:  # without ggml-cpu's extra buffer types (runtime weight repacking, AMX), as oracle.py
        default_params = llama_module.llama_cpp.llama_model_default_params

        def params_without_repacking():
            params = default_params()
            params.use_extra_bufts = False
            return params

        llama_module.llama_cpp.llama_model_default_params = params_without_repacking
    llm = Llama(model_path=path, n_ctx=pp + tg + 16, n_batch=512, n_ubatch=512, n_threads=threads,
                n_threads_batch=threads, verbose=False)
    oracle.llama_bench(llm, llm.n_vocab(), [16], 2)  # page the weights in, as fak's load does
    return oracle.llama_bench(llm, llm.n_vocab(), [pp], tg)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tool", required=True, help="fak_logits_dump")
    p.add_argument("--work", default=os.path.expanduser("~/.cache/fak-quant-speed"))
    p.add_argument("--archs", default=",".join(SHAPES))
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--layers", type=int, default=0, help="fewer layers than the shape's 22 (0: all)")
    p.add_argument("--pp", type=int, default=512)
    p.add_argument("--tg", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--prepare", action="store_true", help="only generate and quantize the files")
    p.add_argument("--no-repack", action="store_true", help="llama.cpp without its runtime weight repacking")
    args = p.parse_args()
    for kind in args.kinds.split(","):
        if kind not in KINDS:
            raise SystemExit(f"unknown kind {kind} (known: {', '.join(KINDS)})")
    keys = [f"pp{args.pp}", f"tg{args.tg}"]
    print(f"| arch | type | {keys[0]} fak | llama.cpp | ratio | {keys[1]} fak | llama.cpp | ratio | load |")
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    for arch in args.archs.split(","):
        shape = SHAPES[arch]
        if args.layers:
            shape = dataclasses.replace(shape, layers=args.layers)
        for kind in args.kinds.split(","):
            path = model_file(args.work, arch, shape, kind, args.threads)
            if args.prepare:
                continue
            ours, theirs = {k: [] for k in keys}, {k: [] for k in keys}
            # llama.cpp with its weight repacking (its default) unless --no-repack; where that crashes
            # (llama-cpp-python 0.3.36 on Sapphire Rapids), without it, and the row says so.
            repack = not args.no_repack
            try:
                for _ in range(args.rounds):  # interleaved: fak, llama.cpp, fak, ...
                    for k, v in fak_round(args.tool, path, args.threads, args.pp, args.tg).items():
                        ours[k].append(v)
                    try:
                        result = llama_round(path, args.threads, args.pp, args.tg, repack)
                    except RuntimeError:
                        if not repack:
                            raise
                        repack = False
                        result = llama_round(path, args.threads, args.pp, args.tg, repack)
                    for k, v in result.items():
                        theirs[k].append(v)
            except RuntimeError as e:
                print(f"| {arch} | {kind.upper()} | failed: {e} |", flush=True)
                continue
            med = [(statistics.median(ours[k]), statistics.median(theirs[k])) for k in keys]
            cells = " | ".join(f"{a:.1f} | {b:.1f} | {a / b:.2f}x" for a, b in med)
            label = kind.upper() + ("" if repack else " (llama.cpp without repacking)")
            print(f"| {arch} | {label} | {cells} | {os.getloadavg()[0]:.1f} |", flush=True)
    print(f"\ntokens/s, median of {args.rounds} interleaved rounds, {args.threads} threads, "
          f"shape h{shape.hidden} L{shape.layers}; ratio = fak / llama.cpp")
    return 0


if __name__ == "__main__":
    sys.exit(main())
