// safetensors: read-only access to a Hugging Face .safetensors checkpoint — tensor names, dtypes,
// shapes and zero-copy data views into a read-only mapping. Also the few HF config.json fields
// fak's model code needs. Format notes: docs/gguf.md ("safetensors").
#ifndef FAK_IO_SAFETENSORS_H_
#define FAK_IO_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/export.h"
#include "fak/core/status.h"

namespace fak {

enum class SafetensorsDtype {
  kBool, kU8, kI8, kF8E5M2, kF8E4M3, kI16, kU16, kF16, kBF16, kI32, kU32, kF32, kF64, kI64, kU64,
};
FAK_EXPORT std::string_view SafetensorsDtypeName(SafetensorsDtype dtype);  // "BF16"
FAK_EXPORT size_t SafetensorsDtypeSize(SafetensorsDtype dtype);            // bytes per element

struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<int64_t> shape;  // row-major, last dimension fastest; [] is a scalar
  const uint8_t* data = nullptr;  // inside the mapping
  uint64_t size_bytes = 0;        // product(shape) * dtype size

  std::span<const uint8_t> bytes() const { return {data, static_cast<size_t>(size_bytes)}; }
};

// A parsed .safetensors file. Immutable after Open; safe to share between threads; owns the mapping.
class FAK_EXPORT SafetensorsFile {
 public:
  // IOError when the file cannot be mapped; Corruption naming the tensor/field for a malformed
  // header (bad JSON, unknown dtype, offsets out of bounds, size mismatch, gaps or overlaps).
  static Result<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  // Parses caller-owned bytes that outlive the result; `name` labels errors.
  static Result<std::unique_ptr<SafetensorsFile>> Parse(std::span<const uint8_t> bytes, std::string name);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& name() const { return name_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }  // sorted by name
  const SafetensorsTensor* FindTensor(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }  // "__metadata__"

 private:
  SafetensorsFile();
  struct Mapping;
  std::unique_ptr<Mapping> mapping_;
  std::string name_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Fields of a Hugging Face config.json (Llama and Gemma 3 text; a multimodal Gemma 3 config's
// `text_config` is used when present). Absent optional fields stay empty; model code applies the
// defaults (model-formats.md §6.2–6.3).
struct HfConfig {
  std::string model_type;            // "llama", "gemma3_text", "gemma3", …
  std::vector<std::string> architectures;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  std::optional<int64_t> num_key_value_heads;
  std::optional<int64_t> head_dim;
  std::optional<int64_t> max_position_embeddings;
  std::optional<double> rms_norm_eps;
  std::optional<double> rope_theta;
  // rope_theta and rope_scaling, or Transformers v5's rope_parameters (flat, or for Gemma 3 its
  // full_attention object; its sliding_attention object gives rope_local_base_freq and
  // rope_local_scaling_type).
  std::string rope_scaling_type;     // rope_scaling.rope_type (or .type); empty when null
  std::optional<double> rope_scaling_factor;
  // rope_scaling of rope_type "llama3" (Llama 3.1-3.3)
  std::optional<double> rope_scaling_low_freq_factor, rope_scaling_high_freq_factor;
  std::optional<int64_t> rope_scaling_original_max_position_embeddings;
  // rope_type "yarn"
  std::optional<double> rope_scaling_beta_fast, rope_scaling_beta_slow, rope_scaling_attention_factor;
  bool rope_scaling_truncate = true;
  bool rope_scaling_has_mscale = false;  // DeepSeek's mscale / mscale_all_dim (not supported)
  bool tie_word_embeddings = false;  // Default: false (HF's default for Llama)
  std::vector<int64_t> bos_token_ids, eos_token_ids;  // an int or a list in the file
  std::string torch_dtype;
  std::string hidden_act;            // hidden_act or hidden_activation
  // Gemma 3
  std::optional<double> query_pre_attn_scalar;
  std::optional<int64_t> sliding_window;
  std::optional<int64_t> sliding_window_pattern;
  std::optional<double> rope_local_base_freq;
  std::string rope_local_scaling_type;  // v5 rope_parameters.sliding_attention.rope_type
  std::optional<double> final_logit_softcapping;
  std::vector<std::string> layer_types;
  // Qwen2
  bool use_sliding_window = false;
};
// Parses config.json text. InvalidArgument naming the key for a missing required field (the five
// sizes above) or a wrong type; Corruption for malformed JSON.
FAK_EXPORT Result<HfConfig> ParseHfConfig(std::string_view json_text, std::string_view name = "config.json");
FAK_EXPORT Result<HfConfig> LoadHfConfig(const std::string& path);

}  // namespace fak

#endif  // FAK_IO_SAFETENSORS_H_
