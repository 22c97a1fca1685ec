// ModelConfig: validation naming the inconsistent field, and the shapes fak ships presets for.
#include <charconv>
#include <cmath>
#include <string>
#include <utility>

#include "fak/model/model.h"

namespace fak {
namespace {

Status Field(const char* name, const std::string& why) { return InvalidArgument(std::string("ModelConfig.") + name + ": " + why); }

// The shortest decimal that round-trips the double ("8", "0.5", "1e+06").
std::string Shortest(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

Status ValidateYarn(const ModelConfig& c) {
  const ModelConfig::RopeYarn& y = c.rope_yarn;
  if (!std::isfinite(y.factor) || !(y.factor >= 1.0)) return Field("rope_yarn.factor", Shortest(y.factor) + " must be >= 1");
  if (c.rope_scale_factor != 1.0 || !c.rope_freq_factors.empty()) {
    return Field("rope_yarn", "cannot be combined with linear or llama3 scaling");
  }
  if (y.original_context == 0) return Field("rope_yarn.original_context", "must be > 0");
  if (!std::isfinite(y.beta_fast) || !std::isfinite(y.beta_slow) || !(y.beta_slow > 0.0) || !(y.beta_fast > y.beta_slow)) {
    return Field("rope_yarn.beta_fast", Shortest(y.beta_fast) + " must exceed beta_slow " + Shortest(y.beta_slow) + " > 0");
  }
  if (!std::isfinite(y.magnitude) || !(y.magnitude > 0.0)) return Field("rope_yarn.magnitude", Shortest(y.magnitude) + " must be > 0");
  return Status::Ok();
}

Status ValidateRopeScaling(const ModelConfig& c) {
  if (!std::isfinite(c.rope_scale_factor) || !(c.rope_scale_factor > 0.0)) {
    return Field("rope_scale_factor", Shortest(c.rope_scale_factor) + " must be finite and > 0");
  }
  if (!std::isfinite(c.rope_attn_factor) || !(c.rope_attn_factor > 0.0)) {
    return Field("rope_attn_factor", Shortest(c.rope_attn_factor) + " must be finite and > 0");
  }
  if (c.rope_yarn.factor != 0.0) {
    if (c.rope_attn_factor != 1.0) return Field("rope_attn_factor", "cannot be combined with YaRN (its magnitude)");
    return ValidateYarn(c);
  }
  if (c.rope_freq_factors.empty()) return Status::Ok();
  if (c.rope_freq_factors.size() != c.RotaryDims() / 2) {
    return Field("rope_freq_factors", "has " + std::to_string(c.rope_freq_factors.size()) +
                                          " entries, expected rotary dims/2 = " + std::to_string(c.RotaryDims() / 2));
  }
  for (size_t i = 0; i < c.rope_freq_factors.size(); ++i) {
    const float f = c.rope_freq_factors[i];
    if (!std::isfinite(f) || !(f > 0.0f)) {
      return Field("rope_freq_factors", "entry " + std::to_string(i) + " = " + Shortest(f) + " must be finite and > 0");
    }
  }
  // llama.cpp's gemma graphs pass no frequency factors; a Gemma file with them has no reference.
  if (c.IsGemma()) return Field("rope_freq_factors", std::string("not applied by ") + ArchitectureName(c.architecture));
  return Status::Ok();
}

}  // namespace

Status ModelConfig::Validate() const {
  // Every size is bounded first, far above any real model, so that no product of sizes computed
  // from a file (weights, caches, tables) can wrap: a crafted head_dim of 2^62 must be an error,
  // not an allocation that aborts.
  auto in_range = [](const char* field, size_t v, size_t max) -> Status {
    if (v == 0) return Field(field, "must be > 0");
    if (v > max) return Field(field, std::to_string(v) + " exceeds " + std::to_string(max));
    return Status::Ok();
  };
  FAK_RETURN_IF_ERROR(in_range("vocab_size", vocab_size, size_t{1} << 24));
  FAK_RETURN_IF_ERROR(in_range("hidden_size", hidden_size, size_t{1} << 16));
  FAK_RETURN_IF_ERROR(in_range("n_layers", n_layers, size_t{1} << 12));
  FAK_RETURN_IF_ERROR(in_range("n_heads", n_heads, size_t{1} << 12));
  FAK_RETURN_IF_ERROR(in_range("n_kv_heads", n_kv_heads, size_t{1} << 12));
  FAK_RETURN_IF_ERROR(in_range("head_dim", head_dim, size_t{1} << 12));
  FAK_RETURN_IF_ERROR(in_range("ffn_size", ffn_size, size_t{1} << 20));
  FAK_RETURN_IF_ERROR(in_range("context_length", context_length, size_t{1} << 24));
  if (n_heads % n_kv_heads != 0) {
    return Field("n_kv_heads", std::to_string(n_kv_heads) + " does not divide n_heads " + std::to_string(n_heads));
  }
  if (head_dim % 2 != 0) return Field("head_dim", std::to_string(head_dim) + " must be even");
  if (rope_dim % 2 != 0 || rope_dim > head_dim) {
    return Field("rope_dim", std::to_string(rope_dim) + " must be even and at most head_dim " + std::to_string(head_dim));
  }
  if (architecture == Architecture::kLlama && n_heads * head_dim != hidden_size) {
    return Field("head_dim", "n_heads " + std::to_string(n_heads) + " x head_dim " + std::to_string(head_dim) +
                                 " != hidden_size " + std::to_string(hidden_size));
  }
  if (!std::isfinite(rope_base) || !(rope_base > 1.0)) return Field("rope_base", Shortest(rope_base) + " must be finite and > 1");
  FAK_RETURN_IF_ERROR(ValidateRopeScaling(*this));
  if (!std::isfinite(rms_eps) || !(rms_eps > 0.0f)) return Field("rms_eps", Shortest(rms_eps) + " must be finite and > 0");
  auto valid_id = [&](int32_t id) { return id == -1 || (id >= 0 && static_cast<size_t>(id) < vocab_size); };
  if (!valid_id(bos_id)) return Field("bos_id", std::to_string(bos_id) + " outside the vocabulary");
  if (!valid_id(eos_id)) return Field("eos_id", std::to_string(eos_id) + " outside the vocabulary");
  if (qkv_bias && architecture != Architecture::kLlama) return Field("qkv_bias", "only Llama-family models (Qwen2) have one");
  for (auto [name, cap] : {std::pair{"attn_logit_softcap", attn_logit_softcap}, {"final_logit_softcap", final_logit_softcap}}) {
    if (!std::isfinite(cap) || !(cap >= 0.0f)) return Field(name, Shortest(cap) + " must be finite and >= 0");
  }
  if (n_experts > 0) {
    FAK_RETURN_IF_ERROR(in_range("n_experts", n_experts, size_t{1} << 10));
    FAK_RETURN_IF_ERROR(in_range("expert_ffn_size", expert_ffn_size, size_t{1} << 20));
    if (n_experts_used == 0 || n_experts_used > n_experts) {
      return Field("n_experts_used", std::to_string(n_experts_used) + " must be in [1, n_experts " + std::to_string(n_experts) + "]");
    }
  }
  if (architecture == Architecture::kGptOss && n_experts == 0) return Field("n_experts", "gpt-oss is a mixture of experts: must be > 0");
  if (HasSlidingLayers() && sliding_window > 0 && sliding_window_pattern == 0) {
    return Field("sliding_window_pattern", "must be > 0");
  }
  if (IsGemma()) {
    if (!std::isfinite(rope_local_base) || !(rope_local_base > 1.0)) {
      return Field("rope_local_base", Shortest(rope_local_base) + " must be finite and > 1");
    }
    if (!std::isfinite(query_pre_attn_scalar) || !(query_pre_attn_scalar >= 0.0f)) {
      return Field("query_pre_attn_scalar", "must be finite and >= 0");
    }
  }
  return Status::Ok();
}

bool ModelConfig::IsSlidingLayer(size_t layer) const {
  return HasSlidingLayers() && sliding_window > 0 && sliding_window_pattern > 0 && (layer + 1) % sliding_window_pattern != 0;
}

bool ModelConfig::IsRopeLayer(size_t layer) const {
  return nope_layer_interval == 0 || (layer + 1) % nope_layer_interval != 0;
}

const char* ArchitectureName(Architecture a) {
  switch (a) {
    case Architecture::kLlama: return "llama";
    case Architecture::kGemma3: return "gemma3";
    case Architecture::kQwen3: return "qwen3";
    case Architecture::kGemma2: return "gemma2";
    case Architecture::kPhi3: return "phi3";
    case Architecture::kSmolLM3: return "smollm3";
    case Architecture::kQwen3Moe: return "qwen3moe";
    case Architecture::kGptOss: return "gpt-oss";
  }
  return "unknown";
}

std::string ModelConfig::RopeScalingLabel() const {
  if (rope_yarn.factor != 0.0) {
    return "yarn " + Shortest(rope_yarn.factor) + " orig " + std::to_string(rope_yarn.original_context) + " beta " +
           Shortest(rope_yarn.beta_fast) + "/" + Shortest(rope_yarn.beta_slow) + " mag " + Shortest(rope_yarn.magnitude);
  }
  std::string label;
  if (rope_scale_factor != 1.0) label = "linear " + Shortest(rope_scale_factor);
  if (!rope_freq_factors.empty()) {
    // The factors themselves, hashed: two files with other factors never share a label.
    Digester d;
    d.Update(rope_freq_factors.data(), rope_freq_factors.size() * sizeof(float));
    label += (label.empty() ? "" : " + ") + std::string(architecture == Architecture::kPhi3 ? "longrope " : "llama3 ") +
             d.Finish().Hex();
  }
  if (rope_attn_factor != 1.0) label += (label.empty() ? "" : " + ") + std::string("attn ") + Shortest(rope_attn_factor);
  return label.empty() ? "none" : label;
}

std::string ModelConfig::Describe() const {
  // The features a Llama or Gemma 3 config lacks add nothing, so their descriptions (and digests)
  // stay as they were.
  return std::string(ArchitectureName(architecture)) + " h" + std::to_string(hidden_size) + " L" +
         std::to_string(n_layers) + " heads " + std::to_string(n_heads) + "/" + std::to_string(n_kv_heads) + " hd" +
         std::to_string(head_dim) + (rope_dim != 0 ? " rot" + std::to_string(rope_dim) : "") + " ffn" +
         std::to_string(ffn_size) + " vocab" + std::to_string(vocab_size) + (tied_embeddings ? " tied" : "") +
         (qkv_bias ? " qkv-bias" : "") + " ctx" + std::to_string(context_length) +
         (HasSlidingLayers() && sliding_window > 0
              ? " swa" + std::to_string(sliding_window) + "/" + std::to_string(sliding_window_pattern)
              : "") +
         (nope_layer_interval != 0 ? " nope/" + std::to_string(nope_layer_interval) : "") +
         (attn_logit_softcap != 0.0f ? " attn-cap " + Shortest(attn_logit_softcap) : "") +
         (final_logit_softcap != 0.0f ? " final-cap " + Shortest(final_logit_softcap) : "") +
         (n_experts > 0 ? " experts " + std::to_string(n_experts_used) + "/" + std::to_string(n_experts) + " ffn" +
                              std::to_string(expert_ffn_size)
                        : "");
}

ModelConfig ModelConfig::EmbeddedDefault() {
  ModelConfig c;
  c.vocab_size = 258;  // 256 bytes + BOS + EOS (the byte-level tokenizer)
  c.hidden_size = 256;
  c.n_layers = 4;
  c.n_heads = 8;
  c.n_kv_heads = 2;
  c.head_dim = 32;
  c.ffn_size = 768;
  c.rope_base = 10000.0;
  c.context_length = 4096;
  c.bos_id = 256;
  c.eos_id = 257;
  return c;
}

ModelConfig ModelConfig::SmolLM2_135M_Shape() {
  ModelConfig c;
  c.vocab_size = 49152;
  c.hidden_size = 576;
  c.n_layers = 30;
  c.n_heads = 9;
  c.n_kv_heads = 3;
  c.head_dim = 64;
  c.ffn_size = 1536;
  c.rope_base = 100000.0;
  c.context_length = 2048;
  return c;
}

ModelConfig ModelConfig::TinyLlama_1_1B_Shape() {
  ModelConfig c;
  c.vocab_size = 32000;
  c.hidden_size = 2048;
  c.n_layers = 22;
  c.n_heads = 32;
  c.n_kv_heads = 4;
  c.head_dim = 64;
  c.ffn_size = 5632;
  c.tied_embeddings = false;
  c.context_length = 2048;
  return c;
}

}  // namespace fak
