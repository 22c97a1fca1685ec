#!/usr/bin/env python3
"""Generates the Hugging Face fixtures under tests/data/hf/ (committed; rerun only to change them).

Needs: numpy, gguf, safetensors, tokenizers (pip). Deterministic: fixed seeds, no network.

Models (tests/model/hf_model_test.cc):
  llama/          config.json + model.safetensors (F16, written by safetensors.numpy) - HF layout,
                  HF names, q/k rows unpermuted (rotate_half pairing).
  llama_sharded/  the same weights as F32 in two shards + model.safetensors.index.json.
  llama.gguf      the same weights as F32 in a llama GGUF, q/k permuted as llama.cpp's
                  convert_hf_to_gguf.py (LlamaModel.permute) does.
  llama3_rope/    the llama weights with Llama 3.1 "llama3" rope_scaling in config.json
  llama3_rope.gguf   and its GGUF twin with rope_freqs.weight as the converter computes it (f32).
  llama3_rope.logits the reference on ROPE_PROMPT (llama3_rope.tokens: 100 ids, so the scaled dims rotate visibly),
                  inverse frequencies from transformers' _compute_llama3_parameters in float64.
                  `make_hf_fixtures.py llama3_rope` writes only these.
  qwen2/          the llama weights plus q/k/v biases as a Qwen2 checkpoint (model_type "qwen2",
                  rope_theta 1e6), F16; `make_hf_fixtures.py qwen2` writes only these three.
  qwen2.gguf      its qwen2 GGUF twin (F32, q/k unpermuted: llama.cpp's qwen2 rotates NEOX-style).
  qwen2.logits    the reference on PROMPT, biases added before RoPE as Qwen2Attention does.
  gemma/          Gemma 3 text config.json + model.safetensors (BF16, raw norm weights w).
  gemma.gguf      the same as a gemma3 GGUF: norms stored as w + 1 (in f32), as the converter does.
  *.logits        float32 [n_tokens][vocab] next-token logits of `PROMPT` from an independent
                  float64 numpy forward pass written from the HF modeling code (rotate_half RoPE,
                  (1 + w) Gemma norms, sliding window), not from fak.

Tokenizers (tests/tokenizer/hf_tokenizer_test.cc): vocabularies cut from the llama.cpp vocab GGUFs
in tests/data/vocab/, each written both as tokenizer.json and as a vocab-only GGUF.
  bpe.gguf, bpe_{gpt2,llama3,qwen2,smollm}.json   byte-level BPE (first 1500 GPT-2 merges), four
                                                 pre-tokenizer configurations.
  spm.gguf, spm_{llama,gemma,metaspace}.json      SentencePiece-style BPE (byte_fallback) from the
                                                 Llama 2 vocab: merges built as transformers'
                                                 LlamaConverter (SentencePieceExtractor) builds them.
  spm/tokenizer.json + tokenizer_config.json      a checkpoint-style directory (BOS/EOS/add_bos).
  texts.inp                                      the test texts (llama.cpp .inp format).
  <name>.out                                     ids from the HF `tokenizers` library, one line per text.
"""
import json
import math
import os
import struct
import sys

import gguf
import numpy as np
from safetensors.numpy import save_file
from tokenizers import Tokenizer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench", "llama_cpp_oracle"))
from gguf_models import llama3_freq_factors  # noqa: E402  (one copy of the converter's formula)

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = os.path.join(HERE, "..", "vocab")
PROMPT = [1, 5, 9, 2, 33, 17, 60, 4, 41, 8, 23]
ROPE_PROMPT = [1] + [int(t) for t in np.random.default_rng(31).integers(3, 64, size=99)]
# head_dim 8, theta 1e4: wavelengths 6.3 (< 256/8: unchanged), 63 (interpolated, s = 0.44) and
# 628, 6283 (> 256/1: divided by 8) — every branch, none near a threshold.
LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 8.0,
               "original_max_position_embeddings": 256}
LLAMA3_CONTEXT = 1024  # max_position_embeddings: the full trained length, > the original 256

# ---------------------------------------------------------------- models


def f16_round(a):
    return a.astype(np.float16).astype(np.float32)


def bf16_round(a):
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def write_bf16_safetensors(path, tensors):
    """safetensors' numpy API has no bfloat16, so the header is written here (format §6.1)."""
    header, blobs, at = {}, [], 0
    for name in sorted(tensors):
        a = tensors[name]
        raw = (a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
        header[name] = {"dtype": "BF16", "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def rand(rng, shape, scale):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


LLAMA = dict(vocab=64, hidden=32, layers=2, heads=4, kv_heads=2, ffn=48, eps=1e-5, theta=10000.0)


def llama_weights(rng):
    c = LLAMA
    hd = c["hidden"] // c["heads"]
    w = {"model.embed_tokens.weight": rand(rng, (c["vocab"], c["hidden"]), 0.5),
         "model.norm.weight": 1 + rand(rng, (c["hidden"],), 0.1),
         "lm_head.weight": rand(rng, (c["vocab"], c["hidden"]), c["hidden"] ** -0.5)}
    for l in range(c["layers"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = 1 + rand(rng, (c["hidden"],), 0.1)
        w[p + "post_attention_layernorm.weight"] = 1 + rand(rng, (c["hidden"],), 0.1)
        w[p + "self_attn.q_proj.weight"] = rand(rng, (c["heads"] * hd, c["hidden"]), 0.5)
        w[p + "self_attn.k_proj.weight"] = rand(rng, (c["kv_heads"] * hd, c["hidden"]), 0.5)
        w[p + "self_attn.v_proj.weight"] = rand(rng, (c["kv_heads"] * hd, c["hidden"]), c["hidden"] ** -0.5)
        w[p + "self_attn.o_proj.weight"] = rand(rng, (c["hidden"], c["heads"] * hd), c["hidden"] ** -0.5)
        w[p + "mlp.gate_proj.weight"] = rand(rng, (c["ffn"], c["hidden"]), c["hidden"] ** -0.5)
        w[p + "mlp.up_proj.weight"] = rand(rng, (c["ffn"], c["hidden"]), c["hidden"] ** -0.5)
        w[p + "mlp.down_proj.weight"] = rand(rng, (c["hidden"], c["ffn"]), c["ffn"] ** -0.5)
    return {k: f16_round(v) for k, v in w.items()}


def llama_config(**overrides):
    c = LLAMA
    return {**{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": c["vocab"],
            "hidden_size": c["hidden"], "intermediate_size": c["ffn"], "num_hidden_layers": c["layers"],
            "num_attention_heads": c["heads"], "num_key_value_heads": c["kv_heads"], "hidden_act": "silu",
            "max_position_embeddings": 128, "rms_norm_eps": c["eps"], "rope_theta": c["theta"],
            "rope_scaling": None, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
            "torch_dtype": "float16"}, **overrides}


def llama3_inv_freq(dim, base, rs):
    """transformers' _compute_llama3_parameters, in float64."""
    inv = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    inv_llama = np.where(wavelen > old / low, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * inv_llama / factor + smooth * inv_llama
    medium = ~(wavelen < old / high) & ~(wavelen > old / low)
    return np.where(medium, smoothed, inv_llama)


def llama3_rope_freqs(dim, base, rs):
    """rope_freqs.weight as the converter writes it (the oracle's formula, bench/llama_cpp_oracle)."""
    return llama3_freq_factors(dim, base, rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"],
                               rs["original_max_position_embeddings"])


def permute(w, n_head, n_head_kv):
    """convert_hf_to_gguf.py LlamaModel.permute."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape))


def write_llama_gguf(path, w, context=128, rope_freqs=None, arch="llama", theta=LLAMA["theta"]):
    """A llama GGUF, or (arch "qwen2") a qwen2 one: q/k rows as HF stores them, plus the q/k/v biases."""
    c = LLAMA
    g = gguf.GGUFWriter(path, arch)
    g.add_context_length(context)
    g.add_embedding_length(c["hidden"])
    g.add_block_count(c["layers"])
    g.add_feed_forward_length(c["ffn"])
    g.add_head_count(c["heads"])
    g.add_head_count_kv(c["kv_heads"])
    g.add_rope_dimension_count(c["hidden"] // c["heads"])
    g.add_rope_freq_base(theta)
    g.add_layer_norm_rms_eps(c["eps"])
    if rope_freqs is not None:  # the converter yields it first
        g.add_tensor("rope_freqs.weight", rope_freqs)
    g.add_tensor("token_embd.weight", w["model.embed_tokens.weight"])
    g.add_tensor("output_norm.weight", w["model.norm.weight"])
    g.add_tensor("output.weight", w["lm_head.weight"])
    names = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    for l in range(c["layers"]):
        p = f"model.layers.{l}."
        q, k = w[p + "self_attn.q_proj.weight"], w[p + "self_attn.k_proj.weight"]
        if arch == "llama":
            q, k = permute(q, c["heads"], c["heads"]), permute(k, c["heads"], c["kv_heads"])
        g.add_tensor(f"blk.{l}.attn_q.weight", q)
        g.add_tensor(f"blk.{l}.attn_k.weight", k)
        if arch == "qwen2":
            for x in "qkv":
                g.add_tensor(f"blk.{l}.attn_{x}.bias", w[p + f"self_attn.{x}_proj.bias"])
        for hf, gg in names.items():
            g.add_tensor(f"blk.{l}.{gg}.weight", w[p + hf + ".weight"])
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()


GEMMA = dict(vocab=64, hidden=32, layers=3, heads=2, kv_heads=1, head_dim=16, ffn=48, eps=1e-6, theta=1e6,
             local=10000.0, window=4)


def gemma_weights(rng):
    c = GEMMA
    hd = c["head_dim"]
    w = {"model.embed_tokens.weight": rand(rng, (c["vocab"], c["hidden"]), 0.1),
         "model.norm.weight": rand(rng, (c["hidden"],), 0.1)}
    for l in range(c["layers"]):
        p = f"model.layers.{l}."
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm"):
            w[p + n + ".weight"] = rand(rng, (c["hidden"],), 0.1)
        w[p + "self_attn.q_norm.weight"] = rand(rng, (hd,), 0.1)
        w[p + "self_attn.k_norm.weight"] = rand(rng, (hd,), 0.1)
        w[p + "self_attn.q_proj.weight"] = rand(rng, (c["heads"] * hd, c["hidden"]), c["hidden"] ** -0.5)
        w[p + "self_attn.k_proj.weight"] = rand(rng, (c["kv_heads"] * hd, c["hidden"]), c["hidden"] ** -0.5)
        w[p + "self_attn.v_proj.weight"] = rand(rng, (c["kv_heads"] * hd, c["hidden"]), c["hidden"] ** -0.5)
        w[p + "self_attn.o_proj.weight"] = rand(rng, (c["hidden"], c["heads"] * hd), (c["heads"] * hd) ** -0.5)
        w[p + "mlp.gate_proj.weight"] = rand(rng, (c["ffn"], c["hidden"]), c["hidden"] ** -0.5)
        w[p + "mlp.up_proj.weight"] = rand(rng, (c["ffn"], c["hidden"]), c["hidden"] ** -0.5)
        w[p + "mlp.down_proj.weight"] = rand(rng, (c["hidden"], c["ffn"]), c["ffn"] ** -0.5)
    return {k: bf16_round(v) for k, v in w.items()}


def gemma_layer_types():
    return ["full_attention" if (l + 1) % 2 == 0 else "sliding_attention" for l in range(GEMMA["layers"])]


def gemma_config():
    c = GEMMA
    return {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "vocab_size": c["vocab"],
            "hidden_size": c["hidden"], "intermediate_size": c["ffn"], "num_hidden_layers": c["layers"],
            "num_attention_heads": c["heads"], "num_key_value_heads": c["kv_heads"], "head_dim": c["head_dim"],
            "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 128, "rms_norm_eps": c["eps"],
            "rope_theta": c["theta"], "rope_local_base_freq": c["local"], "rope_scaling": None,
            "query_pre_attn_scalar": c["head_dim"], "sliding_window": c["window"], "layer_types": gemma_layer_types(),
            "final_logit_softcapping": None, "attn_logit_softcapping": None, "bos_token_id": 2, "eos_token_id": 1,
            "torch_dtype": "bfloat16"}


def write_gemma_gguf(path, w):
    c = GEMMA
    g = gguf.GGUFWriter(path, "gemma3")
    g.add_context_length(128)
    g.add_embedding_length(c["hidden"])
    g.add_block_count(c["layers"])
    g.add_feed_forward_length(c["ffn"])
    g.add_head_count(c["heads"])
    g.add_head_count_kv(c["kv_heads"])
    g.add_key_length(c["head_dim"])
    g.add_value_length(c["head_dim"])
    g.add_rope_freq_base(c["theta"])
    g.add_layer_norm_rms_eps(c["eps"])
    g.add_sliding_window(c["window"])
    g.add_uint32("gemma3.attention.sliding_window_pattern", 2)
    plus1 = lambda a: (a.astype(np.float32) + np.float32(1.0)).astype(np.float32)  # the converter's +1
    g.add_tensor("token_embd.weight", w["model.embed_tokens.weight"])
    g.add_tensor("output_norm.weight", plus1(w["model.norm.weight"]))
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    norms = {"input_layernorm": "attn_norm", "post_attention_layernorm": "post_attention_norm",
             "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
             "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm"}
    for l in range(c["layers"]):
        p = f"model.layers.{l}."
        for hf, gg in names.items():
            g.add_tensor(f"blk.{l}.{gg}.weight", w[p + hf + ".weight"])
        for hf, gg in norms.items():
            g.add_tensor(f"blk.{l}.{gg}.weight", plus1(w[p + hf + ".weight"]))
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()


# -------- the independent reference: float64 numpy, written from transformers' modeling code


def rms(x, w, eps, one_plus=False):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y * ((1.0 if one_plus else 0.0) + w)


def rope_half(x, pos, base, inv=None):  # x [T, H, hd]; HF apply_rotary_pos_emb with rotate_half
    hd = x.shape[-1]
    if inv is None:
        inv = base ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.outer(pos, inv)
    cos = np.concatenate([np.cos(ang)] * 2, -1)[:, None, :]
    sin = np.concatenate([np.sin(ang)] * 2, -1)[:, None, :]
    rot = np.concatenate([-x[..., hd // 2:], x[..., :hd // 2]], -1)
    return x * cos + rot * sin


def attention(q, k, v, scale, window=0):  # q [T, H, hd], k/v [T, KV, hd]; causal, GQA
    T, H, _ = q.shape
    rep = H // k.shape[1]
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    s = np.einsum("thd,shd->hts", q, k) * scale
    t, u = np.arange(T)[:, None], np.arange(T)[None, :]
    mask = (u > t) | ((window > 0) & (t - u >= window))
    s = np.where(mask[None], -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("hts,shd->thd", p, v).reshape(T, -1)


def llama_reference(w, tokens, inv=None, theta=LLAMA["theta"]):
    """Llama, or Qwen2 when w holds q/k/v_proj biases (added before RoPE)."""
    c = LLAMA
    W = {k: v.astype(np.float64) for k, v in w.items()}
    hd = c["hidden"] // c["heads"]
    pos = np.arange(len(tokens))
    x = W["model.embed_tokens.weight"][tokens]
    for l in range(c["layers"]):
        p = f"model.layers.{l}."
        h = rms(x, W[p + "input_layernorm.weight"], c["eps"])
        q, k, v = (h @ W[p + f"self_attn.{x}_proj.weight"].T + W.get(p + f"self_attn.{x}_proj.bias", 0.0) for x in "qkv")
        q = q.reshape(len(tokens), c["heads"], hd)
        k, v = k.reshape(len(tokens), c["kv_heads"], hd), v.reshape(len(tokens), c["kv_heads"], hd)
        q, k = rope_half(q, pos, theta, inv), rope_half(k, pos, theta, inv)
        x = x + attention(q, k, v, hd ** -0.5) @ W[p + "self_attn.o_proj.weight"].T
        h = rms(x, W[p + "post_attention_layernorm.weight"], c["eps"])
        g = h @ W[p + "mlp.gate_proj.weight"].T
        x = x + ((g / (1 + np.exp(-g))) * (h @ W[p + "mlp.up_proj.weight"].T)) @ W[p + "mlp.down_proj.weight"].T
    return rms(x, W["model.norm.weight"], c["eps"]) @ W["lm_head.weight"].T


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def gemma_reference(w, tokens):
    c = GEMMA
    W = {k: v.astype(np.float64) for k, v in w.items()}
    hd, T, eps = c["head_dim"], len(tokens), c["eps"]
    pos = np.arange(T)
    x = W["model.embed_tokens.weight"][tokens] * np.float64(np.sqrt(np.float32(c["hidden"]), dtype=np.float32))
    for l, kind in enumerate(gemma_layer_types()):
        p = f"model.layers.{l}."
        sliding = kind == "sliding_attention"
        base = c["local"] if sliding else c["theta"]
        h = rms(x, W[p + "input_layernorm.weight"], eps, True)
        q = (h @ W[p + "self_attn.q_proj.weight"].T).reshape(T, c["heads"], hd)
        k = (h @ W[p + "self_attn.k_proj.weight"].T).reshape(T, c["kv_heads"], hd)
        v = (h @ W[p + "self_attn.v_proj.weight"].T).reshape(T, c["kv_heads"], hd)
        q = rms(q, W[p + "self_attn.q_norm.weight"], eps, True)
        k = rms(k, W[p + "self_attn.k_norm.weight"], eps, True)
        q, k = rope_half(q, pos, base), rope_half(k, pos, base)
        o = attention(q, k, v, c["head_dim"] ** -0.5, c["window"] if sliding else 0)
        x = x + rms(o @ W[p + "self_attn.o_proj.weight"].T, W[p + "post_attention_layernorm.weight"], eps, True)
        h = rms(x, W[p + "pre_feedforward_layernorm.weight"], eps, True)
        f = gelu_tanh(h @ W[p + "mlp.gate_proj.weight"].T) * (h @ W[p + "mlp.up_proj.weight"].T)
        x = x + rms(f @ W[p + "mlp.down_proj.weight"].T, W[p + "post_feedforward_layernorm.weight"], eps, True)
    return rms(x, W["model.norm.weight"], eps, True) @ W["model.embed_tokens.weight"].T


def write_json(path, obj, compact=False):
    with open(path, "w") as f:
        json.dump(obj, f, indent=None if compact else 1, ensure_ascii=False, separators=(",", ":") if compact else None)
        f.write("\n")


def make_models():
    rng = np.random.default_rng(20240609)
    w = llama_weights(rng)
    os.makedirs(os.path.join(HERE, "llama"), exist_ok=True)
    write_json(os.path.join(HERE, "llama", "config.json"), llama_config())
    save_file({k: v.astype(np.float16) for k, v in w.items()}, os.path.join(HERE, "llama", "model.safetensors"),
              metadata={"format": "pt"})
    os.makedirs(os.path.join(HERE, "llama_sharded"), exist_ok=True)
    write_json(os.path.join(HERE, "llama_sharded", "config.json"), llama_config())
    names = sorted(w)
    shards = [names[: len(names) // 2], names[len(names) // 2:]]
    weight_map = {}
    for i, part in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file({k: w[k] for k in part}, os.path.join(HERE, "llama_sharded", fname), metadata={"format": "pt"})
        weight_map.update({k: fname for k in part})
    write_json(os.path.join(HERE, "llama_sharded", "model.safetensors.index.json"),
               {"metadata": {"total_size": sum(v.nbytes for v in w.values())}, "weight_map": weight_map})
    write_llama_gguf(os.path.join(HERE, "llama.gguf"), w)
    llama_reference(w, PROMPT).astype(np.float32).tofile(os.path.join(HERE, "llama.logits"))

    make_llama3_rope()
    make_qwen2()
    g = gemma_weights(np.random.default_rng(7))
    os.makedirs(os.path.join(HERE, "gemma"), exist_ok=True)
    write_json(os.path.join(HERE, "gemma", "config.json"), gemma_config())
    write_bf16_safetensors(os.path.join(HERE, "gemma", "model.safetensors"), g)
    write_gemma_gguf(os.path.join(HERE, "gemma.gguf"), g)
    gemma_reference(g, PROMPT).astype(np.float32).tofile(os.path.join(HERE, "gemma.logits"))


def make_llama3_rope():
    w = llama_weights(np.random.default_rng(20240609))  # the llama/ weights
    hd = LLAMA["hidden"] // LLAMA["heads"]
    d = os.path.join(HERE, "llama3_rope")
    os.makedirs(d, exist_ok=True)
    write_json(os.path.join(d, "config.json"),
               llama_config(rope_scaling=LLAMA3_ROPE, max_position_embeddings=LLAMA3_CONTEXT))
    save_file({k: v.astype(np.float16) for k, v in w.items()}, os.path.join(d, "model.safetensors"),
              metadata={"format": "pt"})
    write_llama_gguf(os.path.join(HERE, "llama3_rope.gguf"), w, context=LLAMA3_CONTEXT,
                     rope_freqs=llama3_rope_freqs(hd, LLAMA["theta"], LLAMA3_ROPE))
    inv = llama3_inv_freq(hd, LLAMA["theta"], LLAMA3_ROPE)
    llama_reference(w, ROPE_PROMPT, inv).astype(np.float32).tofile(os.path.join(HERE, "llama3_rope.logits"))
    with open(os.path.join(HERE, "llama3_rope.tokens"), "w") as f:
        f.write(" ".join(map(str, ROPE_PROMPT)) + "\n")


QWEN2_THETA = 1e6


def make_qwen2():
    w = llama_weights(np.random.default_rng(20240609))  # the llama/ weights, plus biases
    rng = np.random.default_rng(2025)
    hd = LLAMA["hidden"] // LLAMA["heads"]
    for l in range(LLAMA["layers"]):
        p = f"model.layers.{l}.self_attn."
        w[p + "q_proj.bias"] = f16_round(rand(rng, (LLAMA["heads"] * hd,), 0.5))
        w[p + "k_proj.bias"] = f16_round(rand(rng, (LLAMA["kv_heads"] * hd,), 0.5))
        w[p + "v_proj.bias"] = f16_round(rand(rng, (LLAMA["kv_heads"] * hd,), 0.5))
    d = os.path.join(HERE, "qwen2")
    os.makedirs(d, exist_ok=True)
    write_json(os.path.join(d, "config.json"),
               llama_config(architectures=["Qwen2ForCausalLM"], model_type="qwen2", rope_theta=QWEN2_THETA,
                            use_sliding_window=False, sliding_window=4096, max_window_layers=2))
    save_file({k: v.astype(np.float16) for k, v in w.items()}, os.path.join(d, "model.safetensors"),
              metadata={"format": "pt"})
    write_llama_gguf(os.path.join(HERE, "qwen2.gguf"), w, arch="qwen2", theta=QWEN2_THETA)
    llama_reference(w, PROMPT, theta=QWEN2_THETA).astype(np.float32).tofile(os.path.join(HERE, "qwen2.logits"))


# ---------------------------------------------------------------- tokenizers

EXTRA_TEXTS = [
    "Hello world", "Hello, World! How's it going? I'm fine; you'll see.", "  leading and trailing  ",
    "tabs\tand\nnewlines\r\n\n  mixed", "numbers 1 12 123 1234 12345 3.14159 -42 1e10", "x = [i**2 for i in range(10)]",
    "def f(a, b):\n    return a + b  # sum\n", "Ünïcödé façade naïve café", "日本語のテキスト", "Привет, мир!",
    "emoji 🦙🚀 and 👍🏽 family 👨‍👩‍👧", "     ", "a", "", "<s>inside</s> specials <unk>", "'s 'T 'Re 'VE 'm 'LL 'd",
    "URL https://example.com/path?q=1&r=2", "wörd\u00a0with\u00a0nbsp", "MiXeD CaSe WoRdS", "\n\n\n", "x" * 40,
]


def strs(field):
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


def read_inp(path):
    with open(path, encoding="utf-8", newline="") as f:
        parts = f.read().split("\n__ggml_vocab_test__\n")
    return parts[:-1]


def write_inp(path, texts):
    with open(path, "w", encoding="utf-8", newline="") as f:
        for t in texts:
            f.write(t + "\n__ggml_vocab_test__\n")


def write_vocab_gguf(path, model, tokens, types, scores=None, merges=None, pre=None, bos=None, eos=None, unk=None,
                     add_bos=None):
    g = gguf.GGUFWriter(path, "llama")
    g.add_tokenizer_model(model)
    if pre is not None:
        g.add_tokenizer_pre(pre)
    g.add_token_list(tokens)
    g.add_token_types(types)
    if scores is not None:
        g.add_token_scores(scores)
    if merges is not None:
        g.add_token_merges(merges)
    for key, v in (("bos", bos), ("eos", eos), ("unk", unk)):
        if v is not None:
            getattr(g, f"add_{key}_token_id")(v)
    if add_bos is not None:
        g.add_add_bos_token(add_bos)
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.close()


GPT2_PRE = {
    "gpt2": ({"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}, False),
    "llama3": ({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
         "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}, True),
    "qwen2": ({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
         "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}, False),
    "smollm": ({"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}, False),
}


def make_bpe(texts):
    r = gguf.GGUFReader(os.path.join(VOCAB, "ggml-vocab-gpt-2.gguf"))
    tokens, merges = strs(r.fields["tokenizer.ggml.tokens"]), strs(r.fields["tokenizer.ggml.merges"])
    m = 1500  # GPT-2 merge k creates token 256 + k, so the first m merges close over ids < 256 + m
    assert all(merges[k].replace(" ", "", 1) == tokens[256 + k] for k in range(m))
    kept = tokens[: 256 + m] + ["<|endoftext|>"]
    eot = len(kept) - 1
    types = [1] * eot + [3]
    write_vocab_gguf(os.path.join(HERE, "bpe.gguf"), "gpt2", kept, types, merges=merges[:m], pre="gpt-2",
                     bos=eot, eos=eot)
    for name, (pre, ignore_merges) in GPT2_PRE.items():
        tj = {"version": "1.0", "truncation": None, "padding": None,
              "added_tokens": [{"id": eot, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                                "rstrip": False, "normalized": True, "special": True}],
              "normalizer": None, "pre_tokenizer": pre,
              "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                                 "use_regex": True},
              "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
              "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                        "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                        "ignore_merges": ignore_merges, "vocab": {t: i for i, t in enumerate(kept[:eot])},
                        "merges": merges[:m]}}
        path = os.path.join(HERE, f"bpe_{name}.json")
        write_json(path, tj, compact=True)
        encode_all(path, texts, f"bpe_{name}.out")


def spm_subset():
    r = gguf.GGUFReader(os.path.join(VOCAB, "ggml-vocab-llama-spm.gguf"))
    tokens = strs(r.fields["tokenizer.ggml.tokens"])
    scores = [float(r.fields["tokenizer.ggml.scores"].parts[i][0]) for i in r.fields["tokenizer.ggml.scores"].data]
    types = [int(r.fields["tokenizer.ggml.token_type"].parts[i][0]) for i in r.fields["tokenizer.ggml.token_type"].data]
    singles = {t for i, t in enumerate(tokens) if len(t) == 1 and types[i] == 1}
    keep = [i for i in range(len(tokens))
            if i < 259 or (types[i] == 1 and (len(tokens[i]) == 1 or (i < 1259 and all(ch in singles for ch in tokens[i]))))]
    return [tokens[i] for i in keep], [scores[i] for i in keep], [types[i] for i in keep]


def spm_merges(tokens, scores, types):
    """transformers' SentencePieceExtractor.extract (vocab_scores given): every split of every piece
    into two vocabulary pieces, ordered by the ids of the parts, then stably by piece score, descending."""
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = []
    for piece, i in vocab.items():
        if types[i] != 1:
            continue
        local = [(piece[:k], piece[k:], scores[i]) for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab]
        merges.extend(sorted(local, key=lambda x: (vocab[x[0]], vocab[x[1]])))
    merges = sorted(merges, key=lambda x: x[2], reverse=True)
    return [f"{a} {b}" for a, b, _ in merges]


def spm_json(tokens, types, merges, normalizer, pre_tokenizer):
    added = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i in range(3)]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": normalizer, "pre_tokenizer": pre_tokenizer,
            "post_processor": {"type": "TemplateProcessing",
                               "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                          {"Sequence": {"id": "A", "type_id": 0}}],
                               "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                        {"Sequence": {"id": "A", "type_id": 0}},
                                        {"SpecialToken": {"id": "<s>", "type_id": 1}},
                                        {"Sequence": {"id": "B", "type_id": 1}}],
                               "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
            "decoder": {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
                {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
            "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                      "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges}}


def make_spm(texts):
    tokens, scores, types = spm_subset()
    merges = spm_merges(tokens, scores, types)
    write_vocab_gguf(os.path.join(HERE, "spm.gguf"), "llama", tokens, types, scores=scores, bos=1, eos=2, unk=0,
                     add_bos=True)
    replace = {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}
    variants = {
        "llama": ({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, replace]}, None),
        "gemma": (replace, {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                            "invert": False}),
        "metaspace": (None, {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": False}),
    }
    for name, (norm, pre) in variants.items():
        path = os.path.join(HERE, f"spm_{name}.json")
        write_json(path, spm_json(tokens, types, merges, norm, pre), compact=True)
        encode_all(path, texts, f"spm_{name}.out")
    # The llama one again as a checkpoint directory would hold it, with tokenizer_config.json.
    os.makedirs(os.path.join(HERE, "spm"), exist_ok=True)
    os.replace(os.path.join(HERE, "spm_llama.json"), os.path.join(HERE, "spm", "tokenizer.json"))
    write_json(os.path.join(HERE, "spm", "tokenizer_config.json"),
               {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>",
                "eos_token": {"content": "</s>", "lstrip": False, "normalized": False, "rstrip": False,
                              "single_word": False}, "unk_token": "<unk>"})


def encode_all(path, texts, out_name):
    tok = Tokenizer.from_file(path)
    with open(os.path.join(HERE, out_name), "w") as f:
        for t in texts:
            f.write(" ".join(str(i) for i in tok.encode(t, add_special_tokens=False).ids) + "\n")


def main():
    if sys.argv[1:] == ["llama3_rope"]:
        make_llama3_rope()
        return
    if sys.argv[1:] == ["qwen2"]:
        make_qwen2()
        return
    make_models()
    texts = read_inp(os.path.join(VOCAB, "ggml-vocab-llama-spm.gguf.inp")) + EXTRA_TEXTS
    write_inp(os.path.join(HERE, "texts.inp"), texts)
    make_bpe(texts)
    make_spm(texts)


if __name__ == "__main__":
    main()
