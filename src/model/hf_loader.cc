// ModelConfig and weights from a Hugging Face checkpoint (model-formats.md §6): config.json keys
// with HF's defaults, HF tensor names onto fak's layout, shape and dtype checks.
//
// Two conventions differ from a GGUF of the same model, and both are kept as HF stores them:
// - Q/K rows are in HF order (never permuted), so RoPE pairs dim j with j + head_dim/2 (HF's
//   rotate_half): kSplitHalf for every architecture. A llama GGUF has the rows permuted by the
//   converter and runs with kAdjacent; both compute the same function.
// - Gemma 3 norm weights are the raw w of HF's `x̂ · (1 + w)`; the model sets norm_one_plus and the
//   RMSNorm kernel adds the 1 (a Gemma GGUF stores w + 1 instead; the two give the same bits).
#include "src/model/hf_loader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/rope.h"
#include "src/core/str_cat.h"

namespace fak::internal {
namespace {

bool Has(const std::vector<std::string>& v, std::string_view s) { return std::find(v.begin(), v.end(), s) != v.end(); }

bool IsQwen2(const HfConfig& h) {
  return h.model_type == "qwen2" || (h.model_type.empty() && Has(h.architectures, "Qwen2ForCausalLM"));
}

Result<Architecture> ArchitectureOf(const HfConfig& h, const std::string& file) {
  if (h.model_type == "llama" || (h.model_type.empty() && Has(h.architectures, "LlamaForCausalLM")) || IsQwen2(h)) {
    return Architecture::kLlama;  // Qwen2: a Llama with q/k/v biases
  }
  // A multimodal Gemma 3 config ("gemma3") carries the text model in text_config, which
  // ParseHfConfig reads; its model_type is then "gemma3_text".
  if (h.model_type == "gemma3_text" || h.model_type == "gemma3" ||
      (h.model_type.empty() && Has(h.architectures, "Gemma3ForCausalLM"))) {
    return Architecture::kGemma3;
  }
  std::string archs;
  for (const std::string& a : h.architectures) archs += (archs.empty() ? "" : ", ") + a;
  return Unsupported(file + ": model_type '" + h.model_type + "' (architectures [" + archs +
                     "]) is not supported (supported: llama, qwen2, gemma3_text)");
}

// Features fak does not implement are refused rather than silently ignored.
Status CheckFeatures(const HfConfig& h, const std::string& file, bool gemma) {
  if (h.final_logit_softcapping && *h.final_logit_softcapping != 0.0) {
    return Unsupported(file + ": final_logit_softcapping (not supported)");
  }
  if (h.use_sliding_window) return Unsupported(file + ": use_sliding_window (Qwen2's sliding window is not supported)");
  const char* act = gemma ? "gelu_pytorch_tanh" : "silu";
  if (!h.hidden_act.empty() && h.hidden_act != act) {
    return Unsupported(file + ": hidden_act '" + h.hidden_act + "' (this architecture needs '" + act + "')");
  }
  return Status::Ok();
}

// A rope_scaling number that must be finite and > 0.
Result<double> ScalingParam(const std::string& file, const char* key, const std::optional<double>& v) {
  if (!v) return Corruption(file + ": rope_scaling." + key + " is required for this rope_type");
  if (!std::isfinite(*v) || !(*v > 0.0)) {
    return Corruption(file + ": rope_scaling." + key + " = " + std::to_string(*v) + " must be finite and > 0");
  }
  return *v;
}

// rope_type "yarn" as transformers' _compute_yarn_parameters reads it: original context from
// rope_scaling.original_max_position_embeddings (else max_position_embeddings), truncated correction
// range, attention_factor defaulting to 1 + 0.1 ln factor — the values llama.cpp's converter writes
// for the GGUF. DeepSeek's mscale keys and truncate false (its other branches) are refused.
Status ReadYarn(const HfConfig& h, const std::string& file, ModelConfig* c) {
  if (h.rope_scaling_has_mscale) return Unsupported(file + ": rope_scaling mscale / mscale_all_dim (DeepSeek's YaRN)");
  if (!h.rope_scaling_truncate) return Unsupported(file + ": rope_scaling.truncate false");
  FAK_ASSIGN_OR_RETURN(double factor, ScalingParam(file, "factor", h.rope_scaling_factor));
  const int64_t max_pos = h.max_position_embeddings.value_or(2048);
  int64_t original = max_pos;
  if (const auto& o = h.rope_scaling_original_max_position_embeddings; o.has_value()) {
    if (*o <= 0) return Corruption(file + ": rope_scaling.original_max_position_embeddings = " + std::to_string(*o) + " must be > 0");
    original = *o;
  }
  ModelConfig::RopeYarn& y = c->rope_yarn;
  y.factor = factor;
  y.original_context = static_cast<size_t>(original);
  y.beta_fast = h.rope_scaling_beta_fast.value_or(32.0);
  y.beta_slow = h.rope_scaling_beta_slow.value_or(1.0);
  if (h.rope_scaling_attention_factor) {
    FAK_ASSIGN_OR_RETURN(y.magnitude, ScalingParam(file, "attention_factor", h.rope_scaling_attention_factor));
  } else {
    y.magnitude = 1.0 + 0.1 * std::log(factor);
  }
  return Status::Ok();
}

// rope_scaling as transformers' ROPE_INIT_FUNCTIONS computes it: "linear" divides every inverse
// frequency by factor; "llama3" is _compute_llama3_parameters, kept as the per-frequency divisors a
// GGUF of the model carries (rope_freqs.weight) so both formats run one table. Gemma 3 applies it
// to the global layers' rotary embedding only (MakeRopeBinding). Other types are refused.
Status ReadRopeScaling(const HfConfig& h, const std::string& file, ModelConfig* c) {
  const std::string& t = h.rope_scaling_type;
  if (t.empty() || t == "default") return Status::Ok();
  if (t == "linear") {
    FAK_ASSIGN_OR_RETURN(c->rope_scale_factor, ScalingParam(file, "factor", h.rope_scaling_factor));
    return Status::Ok();
  }
  if (t == "llama3" && c->architecture == Architecture::kLlama) {
    FAK_ASSIGN_OR_RETURN(double factor, ScalingParam(file, "factor", h.rope_scaling_factor));
    FAK_ASSIGN_OR_RETURN(double low, ScalingParam(file, "low_freq_factor", h.rope_scaling_low_freq_factor));
    FAK_ASSIGN_OR_RETURN(double high, ScalingParam(file, "high_freq_factor", h.rope_scaling_high_freq_factor));
    const std::optional<int64_t>& orig = h.rope_scaling_original_max_position_embeddings;
    if (!orig || *orig <= 0) {
      return Corruption(file + ": rope_scaling.original_max_position_embeddings " +
                        (orig ? "= " + std::to_string(*orig) + " must be > 0" : std::string("is required for llama3")));
    }
    if (!(high > low)) {
      return Corruption(file + ": rope_scaling.high_freq_factor " + std::to_string(high) +
                        " must exceed low_freq_factor " + std::to_string(low));
    }
    c->rope_freq_factors = kernels::Llama3RopeFreqFactors(c->head_dim, c->rope_base, factor, low, high,
                                                          static_cast<double>(*orig));
    return Status::Ok();
  }
  if (t == "yarn") return ReadYarn(h, file, c);
  return Unsupported(file + ": rope_scaling.rope_type '" + t + "'" +
                     (c->architecture == Architecture::kLlama ? "" : " on gemma3") +
                     " (supported: linear, yarn; llama3 for llama)");
}

Result<size_t> Positive(const std::string& file, const char* key, int64_t v) {
  if (v <= 0) return Corruption(file + ": " + key + " = " + std::to_string(v) + " must be > 0");
  return static_cast<size_t>(v);
}

// The first of a list of special ids (config.json allows a list) inside the vocabulary, else -1.
// The first of a special token's ids: -1 when none is given; Corruption when one names no token.
Result<int32_t> FirstId(const std::vector<int64_t>& ids, size_t vocab, const std::string& file, const char* key) {
  for (int64_t id : ids) {
    if (id < 0 || static_cast<uint64_t>(id) >= vocab) {
      return Corruption(file + ": " + key + " " + std::to_string(id) + " is outside the vocabulary of " +
                        std::to_string(vocab) + " tokens");
    }
  }
  return ids.empty() ? -1 : static_cast<int32_t>(ids[0]);
}

// HF's layer_types (sliding_attention / full_attention) as fak's period: layer l is global iff
// (l + 1) % period == 0. A layout no period reproduces is Unsupported.
Result<size_t> PeriodOf(const std::vector<std::string>& types, size_t n_layers, const std::string& file) {
  if (types.size() != n_layers) {
    return Corruption(file + ": layer_types has " + std::to_string(types.size()) + " entries for " +
                      std::to_string(n_layers) + " layers");
  }
  for (const std::string& t : types) {
    if (t != "sliding_attention" && t != "full_attention") return Unsupported(file + ": layer_types entry '" + t + "'");
  }
  for (size_t period = 1; period <= n_layers + 1; ++period) {
    bool same = true;
    for (size_t l = 0; l < n_layers && same; ++l) same = (types[l] == "sliding_attention") == ((l + 1) % period != 0);
    if (same) return period;
  }
  return Unsupported(file + ": layer_types has no fixed sliding/global period (not supported)");
}

// Gemma 3 keys with Gemma3TextConfig's defaults.
Status ReadGemmaKeys(const HfConfig& h, const std::string& file, ModelConfig* c) {
  const int64_t window = h.sliding_window.value_or(4096);
  if (window < 0) return Corruption(file + ": sliding_window = " + std::to_string(window) + " must be >= 0");
  c->sliding_window = static_cast<size_t>(window);
  if (!h.layer_types.empty()) {
    FAK_ASSIGN_OR_RETURN(c->sliding_window_pattern, PeriodOf(h.layer_types, c->n_layers, file));
  } else {
    FAK_ASSIGN_OR_RETURN(c->sliding_window_pattern,
                         Positive(file, "sliding_window_pattern", h.sliding_window_pattern.value_or(6)));
  }
  c->rope_local_base = h.rope_local_base_freq.value_or(10000.0);
  if (!h.rope_local_scaling_type.empty() && h.rope_local_scaling_type != "default") {
    return Unsupported(file + ": rope_parameters.sliding_attention.rope_type '" + h.rope_local_scaling_type +
                       "' (Gemma 3's sliding layers rotate unscaled)");
  }
  // 0 means head_dim in ModelConfig; keep it 0 then so the config reads as a GGUF of it does.
  const double scalar = h.query_pre_attn_scalar.value_or(256.0);
  c->query_pre_attn_scalar = scalar == static_cast<double>(c->head_dim) ? 0.0f : static_cast<float>(scalar);
  return Status::Ok();
}

// Where the text model's tensors live: "model." (text-only checkpoints) or the prefixes
// multimodal Gemma 3 checkpoints use (older and newer transformers).
Result<std::string> TextPrefix(const HfCheckpoint& ck) {
  for (const char* p : {"model.", "language_model.model.", "model.language_model."}) {
    if (ck.Find(std::string(p) + "embed_tokens.weight") != nullptr) return std::string(p);
  }
  return Corruption(ck.dir + ": missing tensor model.embed_tokens.weight");
}

std::string LmHeadName(const std::string& prefix) {
  return prefix == "language_model.model." ? "language_model.lm_head.weight" : "lm_head.weight";
}

class TensorReader {
 public:
  TensorReader(const HfCheckpoint& ck, ModelWeights* w) : ck_(ck), w_(w) {}

  // An nn.Linear weight or an embedding: shape [rows, cols].
  Result<WeightTensor> Matrix(const std::string& name, size_t rows, size_t cols) {
    FAK_ASSIGN_OR_RETURN(const SafetensorsTensor* t, Find(name));
    if (t->shape.size() != 2 || static_cast<size_t>(t->shape[0]) != rows || static_cast<size_t>(t->shape[1]) != cols) {
      return BadShape(*t, StrCat("[", std::to_string(rows), ", ", std::to_string(cols), "]"));
    }
    return View(*t, rows, cols, /*matrix=*/true);
  }

  // A norm weight: shape [n].
  Result<WeightTensor> Vector(const std::string& name, size_t n) {
    FAK_ASSIGN_OR_RETURN(const SafetensorsTensor* t, Find(name));
    if (t->shape.size() != 1 || static_cast<size_t>(t->shape[0]) != n)
      return BadShape(*t, StrCat("[", std::to_string(n), "]"));
    return View(*t, 1, n, /*matrix=*/false);
  }

 private:
  Result<const SafetensorsTensor*> Find(const std::string& name) {
    const SafetensorsTensor* t = ck_.Find(name);
    if (t == nullptr) return Corruption(ck_.dir + ": missing tensor " + name);
    return t;
  }
  Status BadShape(const SafetensorsTensor& t, const std::string& want) {
    return Corruption(ck_.dir + ": tensor " + t.name + " has shape " + ShapeString(t.shape) + ", expected " + want);
  }

  // Matrices stay in the mapped file (F16/BF16 too: the matmul widens as it reads, unless the data
  // is misaligned); vectors are read as f32.
  Result<WeightTensor> View(const SafetensorsTensor& t, size_t rows, size_t cols, bool matrix) {
    switch (t.dtype) {
      case SafetensorsDtype::kF32:
        // safetensors packs tensors back to back, so an F32 tensor after an odd-sized F16 one can
        // start off a 4-byte boundary: copy it then rather than read misaligned floats.
        if (reinterpret_cast<uintptr_t>(t.data) % alignof(float) == 0)
          return WeightTensor{DType::kF32, rows, cols, t.data};
        return Own(t, rows, cols);
      case SafetensorsDtype::kF16:
      case SafetensorsDtype::kBF16:
        if (matrix && reinterpret_cast<uintptr_t>(t.data) % alignof(uint16_t) == 0)
          return WeightTensor{t.dtype == SafetensorsDtype::kF16 ? DType::kF16 : DType::kBF16, rows, cols, t.data};
        return Own(t, rows, cols);
      default:
        return Unsupported(ck_.dir + ": tensor " + t.name + " has dtype " + std::string(SafetensorsDtypeName(t.dtype)) +
                           " (supported: F32, F16, BF16)");
    }
  }

  // F16/BF16 widened to owned f32 (exact), or an unaligned F32 copied.
  WeightTensor Own(const SafetensorsTensor& t, size_t rows, size_t cols) {
    const size_t n = rows * cols;
    AlignedBuffer buf(n);
    if (t.dtype == SafetensorsDtype::kF32) {
      std::memcpy(buf.data(), t.data, n * sizeof(float));
    } else {
      std::vector<uint16_t> aligned;  // only when the mapped data is not 2-byte aligned
      const uint16_t* src = reinterpret_cast<const uint16_t*>(t.data);
      if (reinterpret_cast<uintptr_t>(t.data) % alignof(uint16_t) != 0) {
        aligned.resize(n);
        std::memcpy(aligned.data(), t.data, n * sizeof(uint16_t));
        src = aligned.data();
      }
      const kernels::KernelTable& k = kernels::Active();
      if (t.dtype == SafetensorsDtype::kF16) {
        k.f16_to_f32(src, buf.data(), n);
      } else {
        k.bf16_to_f32(src, buf.data(), n);
      }
    }
    WeightTensor w{DType::kF32, rows, cols, buf.data()};
    w_->storage.push_back(std::move(buf));
    return w;
  }

  const HfCheckpoint& ck_;
  ModelWeights* w_;
};

Result<LayerWeights> ReadLayer(TensorReader& r, const ModelConfig& c, const std::string& prefix, size_t l) {
  const std::string p = prefix + "layers." + std::to_string(l) + ".";
  const size_t h = c.hidden_size, q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  const bool gemma = c.architecture == Architecture::kGemma3;
  LayerWeights lw;
  FAK_ASSIGN_OR_RETURN(lw.attn_norm, r.Vector(p + "input_layernorm.weight", h));
  FAK_ASSIGN_OR_RETURN(lw.wq, r.Matrix(p + "self_attn.q_proj.weight", q_dim, h));
  FAK_ASSIGN_OR_RETURN(lw.wk, r.Matrix(p + "self_attn.k_proj.weight", kv_dim, h));
  FAK_ASSIGN_OR_RETURN(lw.wv, r.Matrix(p + "self_attn.v_proj.weight", kv_dim, h));
  FAK_ASSIGN_OR_RETURN(lw.wo, r.Matrix(p + "self_attn.o_proj.weight", h, q_dim));
  // The same HF name is the pre-FFN norm in Llama but the post-attention norm in Gemma 3.
  FAK_ASSIGN_OR_RETURN(
      lw.ffn_norm, r.Vector(p + (gemma ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight"), h));
  FAK_ASSIGN_OR_RETURN(lw.w_gate, r.Matrix(p + "mlp.gate_proj.weight", c.ffn_size, h));
  FAK_ASSIGN_OR_RETURN(lw.w_up, r.Matrix(p + "mlp.up_proj.weight", c.ffn_size, h));
  FAK_ASSIGN_OR_RETURN(lw.w_down, r.Matrix(p + "mlp.down_proj.weight", h, c.ffn_size));
  if (gemma) {
    FAK_ASSIGN_OR_RETURN(lw.q_norm, r.Vector(p + "self_attn.q_norm.weight", c.head_dim));
    FAK_ASSIGN_OR_RETURN(lw.k_norm, r.Vector(p + "self_attn.k_norm.weight", c.head_dim));
    FAK_ASSIGN_OR_RETURN(lw.post_attn_norm, r.Vector(p + "post_attention_layernorm.weight", h));
    FAK_ASSIGN_OR_RETURN(lw.post_ffn_norm, r.Vector(p + "post_feedforward_layernorm.weight", h));
  }
  if (c.qkv_bias) {
    FAK_ASSIGN_OR_RETURN(lw.bq, r.Vector(p + "self_attn.q_proj.bias", q_dim));
    FAK_ASSIGN_OR_RETURN(lw.bk, r.Vector(p + "self_attn.k_proj.bias", kv_dim));
    FAK_ASSIGN_OR_RETURN(lw.bv, r.Vector(p + "self_attn.v_proj.bias", kv_dim));
  }
  return lw;
}

// Tensors of the text model fak would silently ignore (biases other than Qwen2's q/k/v ones) or
// never read (a layer past num_hidden_layers) are refused.
Status CheckExtraTensors(const HfCheckpoint& ck, const std::string& prefix, const ModelConfig& c) {
  for (const auto& [name, t] : ck.tensors) {
    const bool text =
        name.rfind(prefix, 0) == 0 || name.rfind("lm_head.", 0) == 0 || name.rfind("language_model.lm_head.", 0) == 0;
    if (!text || !name.ends_with(".bias")) continue;
    const bool qkv = name.ends_with(".q_proj.bias") || name.ends_with(".k_proj.bias") || name.ends_with(".v_proj.bias");
    if (!(c.qkv_bias && qkv)) return Unsupported(ck.dir + ": tensor " + name + " (biases are not supported)");
  }
  const std::string beyond = prefix + "layers." + std::to_string(c.n_layers) + ".";
  auto it = ck.tensors.lower_bound(beyond);
  if (it != ck.tensors.end() && it->first.rfind(beyond, 0) == 0) {
    return Corruption(ck.dir + ": tensor " + it->first + " beyond num_hidden_layers " + std::to_string(c.n_layers));
  }
  return Status::Ok();
}

}  // namespace

Result<ModelConfig> ConfigFromHf(const HfCheckpoint& ck, const ModelOptions& options) {
  const HfConfig& h = ck.config;
  const std::string& f = ck.config_path;
  ModelConfig c;
  FAK_ASSIGN_OR_RETURN(c.architecture, ArchitectureOf(h, f));
  c.qkv_bias = IsQwen2(h);
  const bool gemma = c.architecture == Architecture::kGemma3;
  c.rope_pairing = RopePairing::kSplitHalf;  // HF rows are unpermuted: rotate_half (model-formats.md §2.5)
  FAK_RETURN_IF_ERROR(CheckFeatures(h, f, gemma));
  FAK_ASSIGN_OR_RETURN(c.vocab_size, Positive(f, "vocab_size", h.vocab_size));
  FAK_ASSIGN_OR_RETURN(c.hidden_size, Positive(f, "hidden_size", h.hidden_size));
  FAK_ASSIGN_OR_RETURN(c.ffn_size, Positive(f, "intermediate_size", h.intermediate_size));
  FAK_ASSIGN_OR_RETURN(c.n_layers, Positive(f, "num_hidden_layers", h.num_hidden_layers));
  FAK_ASSIGN_OR_RETURN(c.n_heads, Positive(f, "num_attention_heads", h.num_attention_heads));
  FAK_ASSIGN_OR_RETURN(c.n_kv_heads,
                       Positive(f, "num_key_value_heads", h.num_key_value_heads.value_or(h.num_attention_heads)));
  FAK_ASSIGN_OR_RETURN(c.head_dim, Positive(f, "head_dim", h.head_dim.value_or(h.hidden_size / h.num_attention_heads)));
  c.rope_base = h.rope_theta.value_or(gemma ? 1000000.0 : 10000.0);
  c.rms_eps = static_cast<float>(h.rms_norm_eps.value_or(1e-6));
  FAK_RETURN_IF_ERROR(ReadRopeScaling(h, f, &c));
  FAK_ASSIGN_OR_RETURN(c.context_length,
                       Positive(f, "max_position_embeddings", h.max_position_embeddings.value_or(2048)));
  if (options.max_context > 0) c.context_length = std::min(c.context_length, options.max_context);
  c.context_length = std::min<size_t>(c.context_length, size_t{1} << 24);
  FAK_ASSIGN_OR_RETURN(std::string prefix, TextPrefix(ck));
  // Gemma 3 ties by default (HF's Gemma3TextConfig), and HfConfig cannot tell an absent key from
  // false: a Gemma checkpoint without an lm_head is tied. A Llama one says so explicitly.
  c.tied_embeddings = h.tie_word_embeddings || (gemma && ck.Find(LmHeadName(prefix)) == nullptr);
  FAK_ASSIGN_OR_RETURN(c.bos_id, FirstId(h.bos_token_ids, c.vocab_size, f, "bos_token_id"));
  FAK_ASSIGN_OR_RETURN(c.eos_id, FirstId(h.eos_token_ids, c.vocab_size, f, "eos_token_id"));
  if (gemma) FAK_RETURN_IF_ERROR(ReadGemmaKeys(h, f, &c));
  FAK_RETURN_IF_ERROR(c.Validate());
  return c;
}

Result<ModelWeights> WeightsFromHf(const HfCheckpoint& ck, const ModelConfig& c) {
  FAK_ASSIGN_OR_RETURN(std::string prefix, TextPrefix(ck));
  FAK_RETURN_IF_ERROR(CheckExtraTensors(ck, prefix, c));
  ModelWeights w;
  w.norm_one_plus = c.architecture == Architecture::kGemma3;  // HF stores w of x̂ · (1 + w)
  TensorReader r(ck, &w);
  FAK_ASSIGN_OR_RETURN(w.token_embedding, r.Matrix(prefix + "embed_tokens.weight", c.vocab_size, c.hidden_size));
  FAK_ASSIGN_OR_RETURN(w.output_norm, r.Vector(prefix + "norm.weight", c.hidden_size));
  if (c.tied_embeddings) {
    w.output = w.token_embedding;
  } else {
    FAK_ASSIGN_OR_RETURN(w.output, r.Matrix(LmHeadName(prefix), c.vocab_size, c.hidden_size));
  }
  for (size_t l = 0; l < c.n_layers; ++l) {
    FAK_ASSIGN_OR_RETURN(LayerWeights lw, ReadLayer(r, c, prefix, l));
    w.layers.push_back(lw);
  }
  return w;
}

}  // namespace fak::internal
