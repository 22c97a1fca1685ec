"""Random-weight GGUF files that both fak and llama.cpp load, and llama.cpp's own quantizer.

Weights are seeded normals with scales chosen so logits are neither collapsed nor saturated
(next-token distributions with a few plausible candidates): projections ~ N(0, 1/in_dim), norm
weights ~ 1 + N(0, 0.1^2), embedding / output head ~ N(0, (4/sqrt(hidden))^2), so logits have a
standard deviation of about 4. Same shape and seed, same file bytes.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os

import numpy as np

import gguf
import gguf.quants


@dataclasses.dataclass(frozen=True)
class Shape:
    # "llama", "qwen2" (a llama with q/k/v biases, NEOX RoPE), "qwen3" (q/k norms), "phi3" (fused
    # attn_qkv and gate-up ffn_up), "smollm3" (every 4th layer without RoPE), "gemma2", "gemma3" or
    # "gpt-oss" (experts with biases, attention sinks, q/k/v/o biases, even layers sliding)
    arch: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tied: bool = True
    sliding_window: int = 0  # gemma2 / gemma3 / gpt-oss; 0 = every layer global
    rope_base: float = 10000.0
    context: int = 4096
    rope_linear: float = 0.0  # rope.scaling.type linear with this factor (gemma3: global layers only); 0 = none
    rope_llama3: tuple = ()  # (factor, low_freq_factor, high_freq_factor, original_context): rope_freqs.weight
    rope_yarn: tuple = ()  # (factor, original_context): rope.scaling.type yarn
    rope_dim: int = 0  # rope.dimension_count when < head_dim (phi3 partial rotary); 0 = head_dim
    longrope: tuple = ()  # phi3 (original_context, attn_factor): random rope_factors_long/short
    softcap: tuple = ()  # gemma2 (attn_logit_softcapping, final_logit_softcapping)
    experts: tuple = ()  # qwen3moe, gpt-oss (expert_count, expert_used_count, expert_feed_forward_length)


# Shapes of the speed table, and the committed fixtures.
SHAPE_A = Shape("llama", 576, 30, 9, 3, 64, 1536, 49152, tied=True)  # SmolLM2-135M
SHAPE_B = Shape("llama", 2048, 22, 32, 4, 64, 5632, 32000, tied=False)  # TinyLlama-1.1B
# The models CPU users run (issue 36's bigger-model table): the published configs' widths, layers,
# heads, vocabularies, RoPE and trained contexts (131072 for Llama 3.2, 40960 for Qwen3, as their
# GGUFs say: decode at 16k depth needs it); random weights. Written with F16 matrices (an F32 file of
# the 8B would not fit this machine's memory while the gguf package assembles it).
_LLAMA3_ROPE = dict(rope_base=500000.0, rope_llama3=(32.0, 1.0, 4.0, 8192), context=131072)
SHAPE_LLAMA32_1B = Shape("llama", 2048, 16, 32, 8, 64, 8192, 128256, tied=True, **_LLAMA3_ROPE)
SHAPE_LLAMA32_3B = Shape("llama", 3072, 28, 24, 8, 128, 8192, 128256, tied=True, **_LLAMA3_ROPE)
SHAPE_QWEN3_4B = Shape("qwen3", 2560, 36, 32, 8, 128, 9728, 151936, tied=True, rope_base=1e6, context=40960)
SHAPE_QWEN3_8B = Shape("qwen3", 4096, 36, 32, 8, 128, 12288, 151936, tied=False, rope_base=1e6, context=40960)
# Qwen3-30B-A3B's widths, heads and experts (128 of 768 wide, 8 per token) with 8 of its 48 layers: the
# whole file's F16 base (61 GB) does not fit this machine's disk (the head and embedding are whole).
SHAPE_QWEN3_30B_A3B_L8 = Shape("qwen3moe", 2048, 8, 32, 4, 128, 6144, 151936, tied=False, rope_base=1e6, context=40960,
                               experts=(128, 8, 768))
FIXTURE_LLAMA = Shape("llama", 64, 2, 4, 2, 16, 128, 288, tied=True, context=512)
FIXTURE_LLAMA_256 = Shape("llama", 256, 2, 4, 2, 64, 256, 288, tied=True, context=512)  # K-quant rows
# Gemma 3: head_dim != hidden/heads, GQA, 6 layers = 5 sliding (window 16 < the prompt) + 1 global,
# global RoPE base 1e6 against the sliding layers' 10000.
FIXTURE_GEMMA = Shape("gemma3", 64, 6, 2, 1, 32, 64, 288, tied=True, sliding_window=16,
                      rope_base=1e6, context=512)
# RoPE scaling on the same weights and tokens (same seeds) as llama_f32 / gemma3_f32. Llama 3
# factors with an original context of 128 and head_dim 16 put wavelengths 6.3 and 20 in the
# unchanged band (< 32), 63 in the interpolated one and 199..19869 in the divided one (> 128), none
# near a threshold; 128 positions rotate the divided dims visibly.
FIXTURE_LLAMA_ROPE_FREQS = dataclasses.replace(FIXTURE_LLAMA, rope_llama3=(8.0, 1.0, 4.0, 128))
FIXTURE_GEMMA_LINEAR = dataclasses.replace(FIXTURE_GEMMA, rope_linear=8.0)  # Gemma 3 4B+: linear x8
# YaRN x4 from an original context of 32 on the llama_f32 weights: with head_dim 16 the ramp spans
# dims 0-2 (extrapolated, blended, interpolated), and 128 positions run far past 32.
FIXTURE_LLAMA_YARN = dataclasses.replace(FIXTURE_LLAMA, rope_yarn=(4.0, 32))
# Qwen2: the llama fixture's shape with Qwen's RoPE base; its q/k/v biases and split-half RoPE are
# what the file checks.
FIXTURE_QWEN2 = dataclasses.replace(FIXTURE_LLAMA, arch="qwen2", rope_base=1e6)
# Qwen3: head_dim 32 with 4 heads of a 64-wide model (q is 128 wide), GQA, per-head q/k norms.
FIXTURE_QWEN3 = Shape("qwen3", 64, 2, 4, 2, 32, 128, 288, tied=True, rope_base=1e6, context=512)
# Phi-3 / Phi-4-mini: fused attn_qkv and gate-up ffn_up, partial rotary (Phi-4-mini rotates 3/4 of
# each head; here 24 of 32), untied head; the LongRoPE twin adds long/short factors with an original
# context of 64 under the 128-token fixture (so the long ones apply) and an attention factor.
FIXTURE_PHI3 = Shape("phi3", 64, 2, 2, 1, 32, 128, 288, tied=False, context=512, rope_dim=24)
FIXTURE_PHI3_LONGROPE = dataclasses.replace(FIXTURE_PHI3, longrope=(64, 1.19))
# SmolLM3: 4 layers, so layer 3 attends without RoPE (llama.cpp: every 4th), NORM RoPE as llama.
FIXTURE_SMOLLM3 = Shape("smollm3", 64, 4, 4, 2, 16, 128, 288, tied=True, context=512)
# Qwen3-MoE: the Qwen3 fixture's attention, 8 experts of 32 wide, 2 per token (router logits wide
# enough that tokens spread over all of them).
FIXTURE_QWEN3MOE = dataclasses.replace(FIXTURE_QWEN3, arch="qwen3moe", experts=(8, 2, 32))
# Gemma 2: 4 layers = 2 sliding (the even ones, window 16 < the prompt) + 2 global, head_dim !=
# hidden/heads, soft-capping low enough to bite on these activations (real models: 50 and 30).
FIXTURE_GEMMA2 = Shape("gemma2", 64, 4, 2, 1, 32, 64, 288, tied=True, sliding_window=16, context=512,
                       softcap=(4.0, 6.0))
# gpt-oss: 4 layers = 2 sliding (the even ones, window 16 < the prompt) + 2 global, q 128 wide over a
# 64-wide model, GQA, 8 experts of 32 wide with 4 per token (as the real 32 / 4), untied head, YaRN x4
# from an original context of 32 on every layer (the real file: x32 from 4096). Expert gate/up weights
# are large enough that the clamped SwiGLU's limit (7) bites; sinks large enough to take a share.
FIXTURE_GPTOSS = Shape("gpt-oss", 64, 4, 4, 2, 32, 32, 288, tied=False, sliding_window=16, context=512,
                       rope_yarn=(4.0, 32), experts=(8, 4, 32))

SPM_PIECES = (
    "the of and to in is that for it as with was on be by at this are from or an not have which "
    "but all were when we there can more if will one about up out do so what their has its into "
    "time only new some could these two may first then any like other than over such"
).split()


def small_spm_vocab(n_vocab: int):
    """An SPM ("llama") vocabulary: <unk> <s> </s>, the 256 byte tokens, then word pieces."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    types += [gguf.TokenType.BYTE] * 256
    scores = [0.0] * len(tokens)
    i = 0
    while len(tokens) < n_vocab:
        word = SPM_PIECES[i % len(SPM_PIECES)]
        piece = "\u2581" + word if i < len(SPM_PIECES) else word
        if i >= 2 * len(SPM_PIECES):
            piece = f"\u2581{word}{i}"
        tokens.append(piece)
        types.append(gguf.TokenType.NORMAL)
        scores.append(-float(i + 1))
        i += 1
    return tokens, scores, types


def read_vocab(path: str):
    """tokens, scores, token types of a vocabulary GGUF (e.g. ggml-vocab-llama-spm.gguf)."""
    r = gguf.GGUFReader(path)
    f = r.fields
    tok = f["tokenizer.ggml.tokens"]
    tokens = [bytes(tok.parts[i]).decode("utf-8") for i in tok.data]
    sc = f["tokenizer.ggml.scores"]
    scores = [float(sc.parts[i][0]) for i in sc.data]
    ty = f["tokenizer.ggml.token_type"]
    types = [int(ty.parts[i][0]) for i in ty.data]
    return tokens, scores, types


def big_spm_vocab(n_vocab: int, llama_spm_gguf: str):
    """The Llama 2 SPM vocabulary, padded with unique pieces up to n_vocab tokens."""
    tokens, scores, types = read_vocab(llama_spm_gguf)
    tokens, scores, types = tokens[:n_vocab], scores[:n_vocab], types[:n_vocab]
    low = min(scores) - 1.0
    for i in range(len(tokens), n_vocab):
        tokens.append(f"\u2581pad{i}")
        scores.append(low - i)
        types.append(int(gguf.TokenType.NORMAL))
    return tokens, scores, types


def _weights(shape: Shape, seed: int):
    """(name, float32 array in numpy [rows, cols] order) for every tensor, seeded."""
    rng = np.random.default_rng(seed)

    def normal(rows, cols, std):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(std))

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)

    h, q, kv, f = shape.hidden, shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim, shape.ffn
    head_std = 4.0 / np.sqrt(h)
    if shape.longrope:  # per-frequency divisors around 1..4, as Phi-3's are
        half = (shape.rope_dim or shape.head_dim) // 2
        yield "rope_factors_long.weight", (1.0 + 3.0 * rng.random(half, dtype=np.float32)).astype(np.float32)
        yield "rope_factors_short.weight", (1.0 + 0.5 * rng.random(half, dtype=np.float32)).astype(np.float32)
    yield "token_embd.weight", normal(shape.vocab, h, head_std)
    yield "output_norm.weight", norm(h)
    if not shape.tied:
        yield "output.weight", normal(shape.vocab, h, head_std)
    for layer in range(shape.layers):
        p = f"blk.{layer}."
        yield p + "attn_norm.weight", norm(h)
        if shape.arch == "phi3":  # fused: q, k, v rows in one tensor
            yield p + "attn_qkv.weight", normal(q + 2 * kv, h, 1 / np.sqrt(h))
        else:
            yield p + "attn_q.weight", normal(q, h, 1 / np.sqrt(h))
            yield p + "attn_k.weight", normal(kv, h, 1 / np.sqrt(h))
            yield p + "attn_v.weight", normal(kv, h, 1 / np.sqrt(h))
        yield p + "attn_output.weight", normal(h, q, 1 / np.sqrt(q))
        if shape.arch == "gpt-oss":  # everything has a bias; the pre-FFN norm is "post_attention_norm"
            n, _, fe = shape.experts
            yield p + "attn_q.bias", normal(1, q, 0.5)[0]
            yield p + "attn_k.bias", normal(1, kv, 0.5)[0]
            yield p + "attn_v.bias", normal(1, kv, 0.5)[0]
            yield p + "attn_output.bias", normal(1, h, 0.1)[0]
            yield p + "attn_sinks.weight", normal(1, shape.heads, 1.5)[0]
            yield p + "post_attention_norm.weight", norm(h)
            # router logits of std ~4: fewer near-ties between the 4th and 5th expert, whose order
            # the engines' last-bit differences (amplified by Q8_0 activations) could swap
            yield p + "ffn_gate_inp.weight", normal(n, h, 4 / np.sqrt(h))
            yield p + "ffn_gate_inp.bias", normal(1, n, 0.5)[0]
            yield p + "ffn_gate_exps.weight", normal(n * fe, h, 3 / np.sqrt(h)).reshape(n, fe, h)
            yield p + "ffn_gate_exps.bias", normal(n, fe, 0.5)
            yield p + "ffn_up_exps.weight", normal(n * fe, h, 3 / np.sqrt(h)).reshape(n, fe, h)
            yield p + "ffn_up_exps.bias", normal(n, fe, 0.5)
            yield p + "ffn_down_exps.weight", normal(n * h, fe, 0.2 / np.sqrt(fe)).reshape(n, h, fe)
            yield p + "ffn_down_exps.bias", normal(n, h, 0.1)
            continue
        yield p + "ffn_norm.weight", norm(h)
        if shape.experts:  # router, then 3-D [expert][rows][cols] stacks
            n, _, fe = shape.experts
            yield p + "ffn_gate_inp.weight", normal(n, h, 2 / np.sqrt(h))
            yield p + "ffn_gate_exps.weight", normal(n * fe, h, 1 / np.sqrt(h)).reshape(n, fe, h)
            yield p + "ffn_up_exps.weight", normal(n * fe, h, 1 / np.sqrt(h)).reshape(n, fe, h)
            yield p + "ffn_down_exps.weight", normal(n * h, fe, 1 / np.sqrt(fe)).reshape(n, h, fe)
        elif shape.arch == "phi3":  # fused: gate rows, then up rows
            yield p + "ffn_up.weight", normal(2 * f, h, 1 / np.sqrt(h))
        else:
            yield p + "ffn_gate.weight", normal(f, h, 1 / np.sqrt(h))
            yield p + "ffn_up.weight", normal(f, h, 1 / np.sqrt(h))
        if not shape.experts:
            yield p + "ffn_down.weight", normal(h, f, 1 / np.sqrt(f))
        if shape.arch == "qwen2":  # Qwen2 biases are large (some k entries reach tens); std 0.5 moves logits
            yield p + "attn_q.bias", normal(1, q, 0.5)[0]
            yield p + "attn_k.bias", normal(1, kv, 0.5)[0]
            yield p + "attn_v.bias", normal(1, kv, 0.5)[0]
        if shape.arch in ("gemma3", "qwen3", "qwen3moe"):
            yield p + "attn_q_norm.weight", norm(shape.head_dim)
            yield p + "attn_k_norm.weight", norm(shape.head_dim)
        if shape.arch in ("gemma2", "gemma3"):
            yield p + "post_attention_norm.weight", norm(h)
            yield p + "post_ffw_norm.weight", norm(h)


def llama3_freq_factors(dim, base, factor, low, high, orig) -> np.ndarray:
    """rope_freqs.weight as convert_hf_to_gguf.py (LlamaModel.generate_extra_tensors) computes it, in f32.
    (tests/data/hf/make_hf_fixtures.py uses it too.)"""
    exponents = np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)
    freqs = np.float32(1.0) / (np.float32(base) ** exponents)
    out = []
    for freq in freqs:
        wavelen = np.float32(2 * np.pi) / freq
        if wavelen < orig / high:
            out.append(1.0)
        elif wavelen > orig / low:
            out.append(factor)
        else:
            smooth = (np.float32(orig) / wavelen - np.float32(low)) / np.float32(high - low)
            out.append(np.float32(1) / ((np.float32(1) - smooth) / np.float32(factor) + smooth))
    return np.array(out, dtype=np.float32)


def llama3_rope_factors(shape: Shape) -> np.ndarray:
    """The rope_freqs.weight of a shape with rope_llama3 set."""
    return llama3_freq_factors(shape.head_dim, shape.rope_base, *shape.rope_llama3)


def write_random_gguf(path: str, shape: Shape, seed: int, vocab, matrix_qtype=None, f16_matrices=False) -> None:
    """Writes an F32 GGUF of `shape` with seeded random weights and the SPM vocabulary `vocab`; with
    `matrix_qtype` (a gguf.GGMLQuantizationType) the layers' projection matrices are quantized to it by
    the gguf package's own quantizer (for formats llama.cpp's quantizer makes only for other models);
    with `f16_matrices` every matrix is stored as F16 (half the bytes; the tensors are spooled to a
    temporary file as they are made, so memory stays at one tensor)."""
    tokens, scores, types = vocab
    assert len(tokens) == shape.vocab, (len(tokens), shape.vocab)
    w = gguf.GGUFWriter(path, shape.arch, use_temp_file=f16_matrices)
    # (llama.cpp looks up Phi-3's special tokens when general.name contains "phi3", which this
    # vocabulary has not, so that name is spelled out.)
    w.add_name(f"fak random {shape.arch.replace('phi3', 'phi-three')} h{shape.hidden} L{shape.layers} seed {seed}")
    w.add_file_type(1 if f16_matrices else 0)  # MOSTLY_F16 / ALL_F32
    w.add_context_length(shape.context)
    w.add_embedding_length(shape.hidden)
    w.add_block_count(shape.layers)
    w.add_feed_forward_length(shape.ffn)
    w.add_head_count(shape.heads)
    w.add_head_count_kv(shape.kv_heads)
    w.add_key_length(shape.head_dim)
    w.add_value_length(shape.head_dim)
    w.add_rope_dimension_count(shape.rope_dim or shape.head_dim)
    w.add_rope_freq_base(shape.rope_base)
    if shape.rope_linear:
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(shape.rope_linear)
    if shape.rope_yarn:
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(shape.rope_yarn[0])
        w.add_rope_scaling_orig_ctx_len(shape.rope_yarn[1])
    if shape.longrope:
        w.add_rope_scaling_orig_ctx_len(shape.longrope[0])
        w.add_rope_scaling_attn_factors(shape.longrope[1])
    gemma = shape.arch in ("gemma2", "gemma3")
    w.add_layer_norm_rms_eps(1e-6 if gemma else 1e-5)
    if (gemma or shape.arch == "gpt-oss") and shape.sliding_window:
        w.add_sliding_window(shape.sliding_window)
    if shape.experts:
        w.add_expert_count(shape.experts[0])
        w.add_expert_used_count(shape.experts[1])
        w.add_expert_feed_forward_length(shape.experts[2])
    if shape.softcap:
        w.add_attn_logit_softcapping(shape.softcap[0])
        w.add_final_logit_softcapping(shape.softcap[1])
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(shape.arch == "llama")
    if shape.rope_llama3:
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(shape))
    for name, arr in _weights(shape, seed):
        if matrix_qtype is not None and arr.ndim == 2 and name.startswith("blk."):
            w.add_tensor(name, gguf.quants.quantize(arr, matrix_qtype), raw_dtype=matrix_qtype)
        elif f16_matrices and arr.ndim >= 2 and "gate_inp" not in name:  # the router stays F32, as converters write it
            w.add_tensor(name, arr.astype(np.float16))
        else:
            w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


FTYPES = {"q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0", "q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M", "q4_1": "LLAMA_FTYPE_MOSTLY_Q4_1",
          "q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0", "q5_0": "LLAMA_FTYPE_MOSTLY_Q5_0", "q5_k_m": "LLAMA_FTYPE_MOSTLY_Q5_K_M",
          "q6_k": "LLAMA_FTYPE_MOSTLY_Q6_K",
          "q5_1": "LLAMA_FTYPE_MOSTLY_Q5_1", "q3_k_m": "LLAMA_FTYPE_MOSTLY_Q3_K_M", "q2_k": "LLAMA_FTYPE_MOSTLY_Q2_K",
          "iq4_xs": "LLAMA_FTYPE_MOSTLY_IQ4_XS", "iq4_nl": "LLAMA_FTYPE_MOSTLY_IQ4_NL",
          "f16": "LLAMA_FTYPE_MOSTLY_F16", "bf16": "LLAMA_FTYPE_MOSTLY_BF16",
          # MXFP4 experts (llama.cpp's MXFP4_MOE: only the 3-D expert tensors; the rest stay as they are)
          "mxfp4_moe": "LLAMA_FTYPE_MOSTLY_MXFP4_MOE"}
# Kinds written by the gguf package's quantizer instead: llama.cpp makes MXFP4 only for MoE experts.
GGUF_PACKAGE_KINDS = {"mxfp4": gguf.GGMLQuantizationType.MXFP4}


def quantize(src: str, dst: str, kind: str, threads: int = 2) -> None:
    """llama.cpp's own quantizer (llama_model_quantize) from `src` to `dst`, kind one of FTYPES."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, FTYPES[kind])
    params.nthread = threads
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params))
    if rc != 0 or not os.path.exists(dst):
        raise RuntimeError(f"llama_model_quantize({src} -> {dst}, {kind}) failed: {rc}")


def tensor_types(path: str) -> dict:
    """{ggml type name: tensor count} of a GGUF file."""
    counts: dict = {}
    for t in gguf.GGUFReader(path).tensors:
        counts[t.tensor_type.name] = counts.get(t.tensor_type.name, 0) + 1
    return counts
