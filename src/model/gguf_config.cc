// ModelConfig from GGUF metadata (model-formats.md §1.6, §4.3): the {arch}.* keys of llama, qwen2,
// qwen3, qwen3moe, phi3, smollm3, gemma2, gemma3 and gpt-oss files as llama.cpp reads them, the vocabulary
// size from the tokenizer's token list, special ids, Gemma's and gpt-oss's sliding window, Gemma 2's
// soft-capping, Phi-3's LongRoPE.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "fak/io/gguf.h"
#include "src/model/gguf_loader.h"

namespace fak::internal {
namespace {

// An unsigned metadata value (a per-layer array must be uniform); `fallback` when absent, or
// Corruption naming the key when there is no fallback.
Result<uint64_t> Uint(const GgufFile& f, const std::string& key, std::optional<uint64_t> fallback) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return Corruption(f.name() + ": missing metadata key " + key);
  }
  if (!v->is_array()) return v->ToUint64();
  FAK_ASSIGN_OR_RETURN(std::vector<int64_t> all, v->ToInt64Array());
  if (all.empty() || all[0] < 0 || std::any_of(all.begin(), all.end(), [&](int64_t x) { return x != all[0]; })) {
    return Unsupported(f.name() + ": " + key + " varies per layer (not supported)");
  }
  return static_cast<uint64_t>(all[0]);
}

Result<double> Real(const GgufFile& f, const std::string& key, std::optional<double> fallback) {
  if (f.Find(key) == nullptr) {
    if (fallback) return *fallback;
    return Corruption(f.name() + ": missing metadata key " + key);
  }
  return f.GetDouble(key);
}

// Special token id `key`, -1 when absent or outside the vocabulary.
// A special token id: -1 when the key is absent; Corruption when it names no token of the vocabulary
// (silently dropping it would change how every prompt is framed).
Result<int32_t> SpecialId(const GgufFile& f, const std::string& key, size_t vocab) {
  auto v = f.GetUint64(key);
  if (!v.has_value()) return -1;
  if (*v >= vocab) {
    return Corruption("GGUF key " + key + " = " + std::to_string(*v) + " is outside the vocabulary of " +
                      std::to_string(vocab) + " tokens");
  }
  return static_cast<int32_t>(*v);
}

// RoPE scaling as llama.cpp reads it (llama_model_loader, model-formats.md §1.6): the type defaults
// to "linear"; the factor (or the old key rope.scale_linear) is 1/freq_scale, absent or 0 meaning 1;
// type "none" never scales. Other types (yarn, longrope) are refused unless their factor is 1, where
// they rotate exactly as no scaling does.
// YaRN with llama.cpp's reading of the keys: original_context_length (default: the trained
// context), yarn_beta_fast / yarn_beta_slow (32 / 1); cos/sin scaled by 1 + 0.1 ln factor. Keys
// that would change that scale or the blend (attn_factor, yarn_attn_factor, DeepSeek's
// yarn_log_multiplier, yarn_ext_factor) are refused unless neutral, rather than guessed at.
Status ReadYarn(const GgufFile& f, const std::string& arch, double factor, ModelConfig* c) {
  const std::string k = arch + ".rope.scaling.";
  FAK_ASSIGN_OR_RETURN(double log_mul, Real(f, k + "yarn_log_multiplier", 0.0));
  if (log_mul != 0.0) return Unsupported(f.name() + ": " + k + "yarn_log_multiplier (DeepSeek's YaRN) is not supported");
  FAK_ASSIGN_OR_RETURN(double ext, Real(f, k + "yarn_ext_factor", 1.0));
  if (ext != 1.0 && ext >= 0.0) return Unsupported(f.name() + ": " + k + "yarn_ext_factor " + std::to_string(ext) + " (only 1)");
  FAK_ASSIGN_OR_RETURN(uint64_t trained, Uint(f, arch + ".context_length", 2048));
  FAK_ASSIGN_OR_RETURN(uint64_t original, Uint(f, k + "original_context_length", trained));
  for (const char* key : {"attn_factor", "yarn_attn_factor"}) {
    FAK_ASSIGN_OR_RETURN(double v, Real(f, k + key, 1.0));
    if (v != 1.0) return Unsupported(f.name() + ": " + k + key + " " + std::to_string(v) + " (only 1)");
  }
  ModelConfig::RopeYarn& y = c->rope_yarn;
  y.factor = factor;
  y.original_context = original;
  FAK_ASSIGN_OR_RETURN(y.beta_fast, Real(f, k + "yarn_beta_fast", 32.0));
  FAK_ASSIGN_OR_RETURN(y.beta_slow, Real(f, k + "yarn_beta_slow", 1.0));
  y.magnitude = 1.0 + 0.1 * std::log(factor);
  return Status::Ok();
}

Status ReadLinearScaling(const GgufFile& f, const std::string& arch, ModelConfig* c) {
  std::string type = "linear";
  const std::string type_key = arch + ".rope.scaling.type";
  if (f.Find(type_key) != nullptr) {
    FAK_ASSIGN_OR_RETURN(std::string_view t, f.GetString(type_key));
    type = std::string(t);
  }
  std::string factor_key = arch + ".rope.scaling.factor";
  if (f.Find(factor_key) == nullptr) factor_key = arch + ".rope.scale_linear";
  FAK_ASSIGN_OR_RETURN(double factor, Real(f, factor_key, 0.0));
  if (!std::isfinite(factor) || factor < 0.0) {
    return Corruption(f.name() + ": " + factor_key + " = " + std::to_string(factor) + " must be finite and >= 0");
  }
  if (type == "none" || factor == 0.0 || factor == 1.0) return Status::Ok();
  if (type == "yarn") return ReadYarn(f, arch, factor, c);
  if (type != "linear") {
    return Unsupported(f.name() + ": " + type_key + " \"" + type + "\" with factor " + std::to_string(factor) +
                       " (supported: linear, yarn, and llama3 as rope_freqs.weight)");
  }
  c->rope_scale_factor = factor;
  return Status::Ok();
}

// Per-frequency RoPE divisors from tensor `t`: F32 [rotary dims/2], each finite and > 0.
Status ReadFactorTensor(const GgufFile& f, const GgufTensorInfo* t, ModelConfig* c) {
  const std::string what = f.name() + ": tensor " + std::string(t->name);
  if (t->type != GgmlType::kF32) return Unsupported(what + " must be F32");
  const size_t half = c->RotaryDims() / 2;
  bool shape_ok = !t->ne.empty() && static_cast<size_t>(t->ne[0]) == half;
  for (size_t i = 1; i < t->ne.size(); ++i) shape_ok = shape_ok && t->ne[i] == 1;
  if (!shape_ok || t->size_bytes != half * sizeof(float)) {
    std::string shape;
    for (int64_t n : t->ne) shape += (shape.empty() ? "" : ", ") + std::to_string(n);
    return Corruption(what + " has shape [" + shape + "], expected [" + std::to_string(half) + "] (rotary dims/2)");
  }
  c->rope_freq_factors.resize(half);
  std::memcpy(c->rope_freq_factors.data(), t->data, half * sizeof(float));
  for (size_t i = 0; i < half; ++i) {
    const float v = c->rope_freq_factors[i];
    if (!std::isfinite(v) || !(v > 0.0f)) {
      return Corruption(what + " entry " + std::to_string(i) + " = " + std::to_string(v) + " must be finite and > 0");
    }
  }
  return Status::Ok();
}

// Llama 3.x "llama3" scaling: rope_freqs.weight divides theta_i by factor_i (llama.cpp's llama
// graph). llama.cpp's other graphs never read it, so another architecture's file with it is refused
// rather than run one way or the other.
Status ReadRopeFreqs(const GgufFile& f, ModelConfig* c) {
  const GgufTensorInfo* t = f.FindTensor("rope_freqs.weight");
  if (t == nullptr) return Status::Ok();
  if (c->architecture != Architecture::kLlama) {
    return Unsupported(f.name() + ": tensor rope_freqs.weight (llama3 RoPE scaling) on a " +
                       ArchitectureName(c->architecture) + " model");
  }
  return ReadFactorTensor(f, t, c);
}

// Phi-3 LongRoPE (Phi-3-128k, Phi-4-mini): rope_factors_long.weight when the context used exceeds
// rope.scaling.original_context_length (default: the trained context), else rope_factors_short.weight
// — llama.cpp's get_rope_factors, decided once here from the (possibly capped) context length.
Status ReadLongRope(const GgufFile& f, const std::string& arch, ModelConfig* c) {
  const GgufTensorInfo* long_t = f.FindTensor("rope_factors_long.weight");
  const GgufTensorInfo* short_t = f.FindTensor("rope_factors_short.weight");
  if (long_t == nullptr && short_t == nullptr) return Status::Ok();
  if (c->architecture != Architecture::kPhi3) {
    return Unsupported(f.name() + ": LongRoPE factor tensors on a " + std::string(ArchitectureName(c->architecture)) +
                       " model (only phi3 applies them)");
  }
  if (long_t == nullptr || short_t == nullptr) {
    return Corruption(f.name() + ": tensor " + (long_t == nullptr ? "rope_factors_long" : "rope_factors_short") +
                      ".weight is missing (LongRoPE needs both)");
  }
  FAK_ASSIGN_OR_RETURN(uint64_t trained, Uint(f, arch + ".context_length", 2048));
  FAK_ASSIGN_OR_RETURN(uint64_t original, Uint(f, arch + ".rope.scaling.original_context_length", trained));
  return ReadFactorTensor(f, c->context_length > original ? long_t : short_t, c);
}

// Features fak does not implement are refused rather than silently ignored (Gemma 2 reads its
// soft-capping keys in ReadGemmaKeys).
Status CheckUnsupported(const GgufFile& f, const std::string& arch) {
  auto cap = Real(f, arch + ".final_logit_softcapping", 0.0);
  if (arch != "gemma2" && cap.has_value() && *cap != 0.0) {
    return Unsupported(f.name() + ": " + arch + ".final_logit_softcapping is not supported");
  }
  return Status::Ok();
}

Result<size_t> VocabSize(const GgufFile& f) {
  if (const GgufValue* tokens = f.Find("tokenizer.ggml.tokens"); tokens != nullptr && tokens->is_array())
    return tokens->array_size();
  if (f.Find("llama.vocab_size") != nullptr) return Uint(f, "llama.vocab_size", std::nullopt);
  const GgufTensorInfo* e = f.FindTensor("token_embd.weight");
  if (e == nullptr || e->ne.size() < 2) return Corruption(f.name() + ": missing tensor token_embd.weight");
  return static_cast<size_t>(e->ne[1]);
}

// Gemma's sliding-window layout, as llama.cpp reads it: `sliding_window_pattern` is either a
// period n (layer l slides iff l % n < n - 1; 0 means every layer slides) or a per-layer array of
// flags (nonzero: sliding); absent, Gemma 3's period is 6 and Gemma 2's 2 (its even layers slide).
// fak expresses it as a period where layer l is global iff (l + 1) % period == 0, so every layer
// sliding is the period n_layers + 1; an array no period reproduces is Unsupported.
Result<size_t> SlidingPattern(const GgufFile& f, const std::string& arch, size_t n_layers, size_t fallback) {
  const std::string key = arch + ".attention.sliding_window_pattern";
  const GgufValue* v = f.Find(key);
  if (v == nullptr) return fallback;
  if (!v->is_array()) {
    FAK_ASSIGN_OR_RETURN(uint64_t n, v->ToUint64());
    return n == 0 ? n_layers + 1 : static_cast<size_t>(n);
  }
  std::vector<bool> sliding(v->array_size());
  for (size_t l = 0; l < sliding.size(); ++l) {
    FAK_ASSIGN_OR_RETURN(GgufValue e, v->At(l));
    bool flag = false;
    if (e.type() == GgufType::kBool) {
      FAK_ASSIGN_OR_RETURN(flag, e.ToBool());
    } else {
      FAK_ASSIGN_OR_RETURN(uint64_t n, e.ToUint64());
      flag = n != 0;
    }
    sliding[l] = flag;
  }
  if (sliding.size() != n_layers) return Corruption(f.name() + ": " + key + " has " + std::to_string(sliding.size()) + " entries for " + std::to_string(n_layers) + " layers");
  for (size_t period = 1; period <= n_layers + 1; ++period) {
    bool same = true;
    for (size_t l = 0; l < n_layers && same; ++l) same = sliding[l] == ((l + 1) % period != 0);
    if (same) return period;
  }
  return Unsupported(f.name() + ": " + key + " is a per-layer layout with no fixed period (not supported)");
}

// Gemma 2 / 3 specifics: window, pattern, local RoPE base, attention scale; Gemma 2's soft-capping.
// Defaults are llama.cpp's: Gemma 2 slides over 4096 positions on its even layers, caps attention
// scores at 50 and logits at 30 (gemma2.attn_logit_softcapping, gemma2.final_logit_softcapping).
Status ReadGemmaKeys(const GgufFile& f, const std::string& a, ModelConfig* c) {
  const bool gemma2 = c->architecture == Architecture::kGemma2;
  FAK_ASSIGN_OR_RETURN(uint64_t window, Uint(f, a + ".attention.sliding_window", gemma2 ? 4096 : 0));
  c->sliding_window = window;
  if (window > 0) {
    FAK_ASSIGN_OR_RETURN(c->sliding_window_pattern, SlidingPattern(f, a, c->n_layers, gemma2 ? 2 : 6));
  }
  // Sliding layers rotate with {arch}.rope.freq_base_swa. Gemma 3: llama.cpp and HF
  // (rope_local_base_freq) default it to 10000, and converted files usually leave it out; Gemma 2
  // rotates every layer alike.
  FAK_ASSIGN_OR_RETURN(c->rope_local_base, Real(f, a + ".rope.freq_base_swa", gemma2 ? c->rope_base : 10000.0));
  // llama.cpp: 1/sqrt(n_embd/n_head) for the 27B (Gemma 3: 62 layers, Gemma 2: 46), 1/sqrt(head_dim)
  // otherwise.
  c->query_pre_attn_scalar = c->n_layers == (gemma2 ? 46u : 62u) ? static_cast<float>(c->hidden_size / c->n_heads) : 0.0f;
  if (gemma2) {
    // llama.cpp scales Gemma 2's sliding layers with the global ones, fak's Gemma tables do not.
    if (c->HasRopeScaling()) return Unsupported(f.name() + ": RoPE scaling on a gemma2 model");
    FAK_ASSIGN_OR_RETURN(double attn_cap, Real(f, a + ".attn_logit_softcapping", 50.0));
    FAK_ASSIGN_OR_RETURN(double final_cap, Real(f, a + ".final_logit_softcapping", 30.0));
    c->attn_logit_softcap = static_cast<float>(attn_cap);
    c->final_logit_softcap = static_cast<float>(final_cap);
  }
  return Status::Ok();
}

// How each general.architecture maps onto ModelConfig. RoPE pairing follows llama.cpp's rope type:
// NORM (adjacent pairs; the converter permuted Q/K rows) for llama and smollm3, NEOX (split halves)
// for the others.
struct ArchSpec {
  const char* name;
  Architecture architecture;
  RopePairing pairing;
  bool qkv_bias;
  size_t nope_layer_interval;
};
constexpr ArchSpec kArchSpecs[] = {
    {"llama", Architecture::kLlama, RopePairing::kAdjacent, false, 0},
    {"qwen2", Architecture::kLlama, RopePairing::kSplitHalf, true, 0},  // a Llama with q/k/v biases
    {"qwen3", Architecture::kQwen3, RopePairing::kSplitHalf, false, 0},
    {"qwen3moe", Architecture::kQwen3Moe, RopePairing::kSplitHalf, false, 0},
    {"phi3", Architecture::kPhi3, RopePairing::kSplitHalf, false, 0},
    // llama.cpp hard-codes SmolLM3's NoPE layers as every 4th (n_no_rope_layer_step = 4): no key.
    {"smollm3", Architecture::kSmolLM3, RopePairing::kAdjacent, false, 4},
    {"gemma2", Architecture::kGemma2, RopePairing::kSplitHalf, false, 0},
    {"gemma3", Architecture::kGemma3, RopePairing::kSplitHalf, false, 0},
    {"gpt-oss", Architecture::kGptOss, RopePairing::kSplitHalf, false, 0},  // its biases: by architecture
};

// gpt-oss's sliding window as llama.cpp reads it: attention.sliding_window (required), every other
// layer sliding unless sliding_window_pattern says otherwise; llama.cpp rotates the sliding layers
// with the global base and scaling (YaRN included), so a different rope.freq_base_swa is refused.
Status ReadGptOssWindow(const GgufFile& f, const std::string& a, ModelConfig* c) {
  FAK_ASSIGN_OR_RETURN(c->sliding_window, Uint(f, a + ".attention.sliding_window", std::nullopt));
  FAK_ASSIGN_OR_RETURN(c->sliding_window_pattern, SlidingPattern(f, a, c->n_layers, 2));
  FAK_ASSIGN_OR_RETURN(double swa_base, Real(f, a + ".rope.freq_base_swa", c->rope_base));
  if (swa_base != c->rope_base) {
    return Unsupported(f.name() + ": " + a + ".rope.freq_base_swa " + std::to_string(swa_base) + " differs from rope.freq_base");
  }
  c->rope_local_base = c->rope_base;
  return Status::Ok();
}

// Qwen3-MoE's and gpt-oss's experts as llama.cpp reads them: expert_count, expert_used_count,
// expert_feed_forward_length (default: feed_forward_length / expert_used_count); the chosen
// experts' weights are always renormalised (llama.cpp passes norm_w = true). What would change the
// mixture beyond that — a weights scale, shared experts — is refused.
Status ReadExperts(const GgufFile& f, const std::string& a, ModelConfig* c) {
  FAK_ASSIGN_OR_RETURN(c->n_experts, Uint(f, a + ".expert_count", std::nullopt));
  FAK_ASSIGN_OR_RETURN(c->n_experts_used, Uint(f, a + ".expert_used_count", std::nullopt));
  if (c->n_experts == 0 || c->n_experts_used == 0) {
    return Corruption(f.name() + ": " + a + ".expert_count and expert_used_count must be > 0");
  }
  FAK_ASSIGN_OR_RETURN(c->expert_ffn_size, Uint(f, a + ".expert_feed_forward_length", c->ffn_size / c->n_experts_used));
  FAK_ASSIGN_OR_RETURN(double scale, Real(f, a + ".expert_weights_scale", 0.0));
  if (scale != 0.0 && scale != 1.0) return Unsupported(f.name() + ": " + a + ".expert_weights_scale " + std::to_string(scale));
  FAK_ASSIGN_OR_RETURN(uint64_t shared, Uint(f, a + ".expert_shared_count", 0));
  if (shared != 0) return Unsupported(f.name() + ": " + a + ".expert_shared_count " + std::to_string(shared) + " (shared experts)");
  return Status::Ok();
}

}  // namespace

Result<ModelConfig> ConfigFromGguf(const GgufFile& f, const ModelOptions& options) {
  FAK_ASSIGN_OR_RETURN(std::string_view arch_name, f.GetString("general.architecture"));
  const ArchSpec* spec = nullptr;
  std::string supported;
  for (const ArchSpec& s : kArchSpecs) {
    if (arch_name == s.name) spec = &s;
    supported += (supported.empty() ? "" : ", ") + std::string(s.name);
  }
  if (spec == nullptr) {
    return Unsupported(f.name() + ": general.architecture \"" + std::string(arch_name) + "\" (supported: " + supported + ")");
  }
  ModelConfig c;
  c.architecture = spec->architecture;
  c.rope_pairing = spec->pairing;
  c.qkv_bias = spec->qkv_bias;
  c.nope_layer_interval = spec->nope_layer_interval;
  const std::string a(arch_name);
  FAK_RETURN_IF_ERROR(CheckUnsupported(f, a));
  FAK_ASSIGN_OR_RETURN(c.hidden_size, Uint(f, a + ".embedding_length", std::nullopt));
  FAK_ASSIGN_OR_RETURN(c.n_layers, Uint(f, a + ".block_count", std::nullopt));
  FAK_ASSIGN_OR_RETURN(c.ffn_size, Uint(f, a + ".feed_forward_length", std::nullopt));
  FAK_ASSIGN_OR_RETURN(c.n_heads, Uint(f, a + ".attention.head_count", std::nullopt));
  if (c.n_heads == 0) return Corruption(f.name() + ": " + a + ".attention.head_count is 0");
  FAK_ASSIGN_OR_RETURN(c.n_kv_heads, Uint(f, a + ".attention.head_count_kv", c.n_heads));
  FAK_ASSIGN_OR_RETURN(c.head_dim, Uint(f, a + ".attention.key_length", c.hidden_size / c.n_heads));
  FAK_ASSIGN_OR_RETURN(uint64_t value_dim, Uint(f, a + ".attention.value_length", c.head_dim));
  if (value_dim != c.head_dim) return Unsupported(f.name() + ": " + a + ".attention.value_length differs from key_length");
  FAK_ASSIGN_OR_RETURN(uint64_t n_rot, Uint(f, a + ".rope.dimension_count", c.head_dim));
  if (n_rot != c.head_dim) {  // partial rotary: Phi-3's graph rotates the first n_rot dims, the others assert
    if (c.architecture != Architecture::kPhi3) {
      return Unsupported(f.name() + ": " + a + ".rope.dimension_count != head dim (partial RoPE; only phi3)");
    }
    if (n_rot == 0 || n_rot > c.head_dim) {
      return Corruption(f.name() + ": " + a + ".rope.dimension_count " + std::to_string(n_rot) + " is not in [1, head dim " +
                        std::to_string(c.head_dim) + "]");
    }
    c.rope_dim = n_rot;
  }
  FAK_ASSIGN_OR_RETURN(c.rope_base, Real(f, a + ".rope.freq_base", 10000.0));
  FAK_RETURN_IF_ERROR(ReadLinearScaling(f, a, &c));
  FAK_RETURN_IF_ERROR(ReadRopeFreqs(f, &c));
  if (c.rope_yarn.factor == 0.0) {  // llama.cpp multiplies cos/sin by it (YaRN refuses it: ReadYarn)
    FAK_ASSIGN_OR_RETURN(c.rope_attn_factor, Real(f, a + ".rope.scaling.attn_factor", 1.0));
  }
  FAK_ASSIGN_OR_RETURN(double eps, Real(f, a + ".attention.layer_norm_rms_epsilon", std::nullopt));
  c.rms_eps = static_cast<float>(eps);
  FAK_ASSIGN_OR_RETURN(c.context_length, Uint(f, a + ".context_length", 2048));
  if (options.max_context > 0) c.context_length = std::min(c.context_length, options.max_context);
  c.context_length = std::min<size_t>(c.context_length, size_t{1} << 24);
  FAK_RETURN_IF_ERROR(ReadLongRope(f, a, &c));
  FAK_ASSIGN_OR_RETURN(c.vocab_size, VocabSize(f));
  c.tied_embeddings = f.FindTensor("output.weight") == nullptr;
  FAK_ASSIGN_OR_RETURN(c.bos_id, SpecialId(f, "tokenizer.ggml.bos_token_id", c.vocab_size));
  FAK_ASSIGN_OR_RETURN(c.eos_id, SpecialId(f, "tokenizer.ggml.eos_token_id", c.vocab_size));
  // llama.cpp's enum llama_pooling_type: 0 none, 1 mean, 2 cls, 3 last, 4 rank (a reranker's head,
  // which fak does not run: mean, as for none).
  FAK_ASSIGN_OR_RETURN(uint64_t pooling, Uint(f, a + ".pooling_type", 0));
  c.pooling = pooling == 2 ? Pooling::kCls : pooling == 3 ? Pooling::kLast : Pooling::kMean;
  if (c.IsGemma()) FAK_RETURN_IF_ERROR(ReadGemmaKeys(f, a, &c));
  if (c.architecture == Architecture::kQwen3Moe || c.architecture == Architecture::kGptOss) {
    FAK_RETURN_IF_ERROR(ReadExperts(f, a, &c));
  }
  if (c.architecture == Architecture::kGptOss) FAK_RETURN_IF_ERROR(ReadGptOssWindow(f, a, &c));
  FAK_RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace fak::internal
