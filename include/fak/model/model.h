// Model: an immutable decoder-only transformer (Llama, Qwen2/3, Qwen3-MoE, Phi-3, SmolLM3, Gemma 2/3 text,
// gpt-oss) and its forward pass on the CPU.
//
// All per-request state lives in a KVCache; a Model is safe to share between threads. Prefill runs
// a whole prompt as one batch; Decode runs one token. Within one kernel tier both produce the same
// K/V and logits bit for bit, because every matmul output is reduced in an order independent of
// the batch and the same attention routine serves both (architecture §2).
#ifndef FAK_MODEL_MODEL_H_
#define FAK_MODEL_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fak/core/digest.h"
#include "fak/core/export.h"
#include "fak/kernels/rope_pairing.h"
#include "fak/kv/kv_cache.h"
#include "fak/core/status.h"

namespace fak {

namespace internal {
struct ModelImpl;    // config, weights, RoPE binding, thread pool (src/model/model_impl.h)
class ModelAccess;   // how the forward pass and tests reach it
}  // namespace internal

// The architectures fak runs (docs/models.md): one forward pass, their differences as data here.
//   kLlama    Llama (and Qwen2: qkv_bias)      kQwen3    Llama + per-head q/k RMSNorm
//   kPhi3     Llama shapes, partial rotary     kSmolLM3  Llama with every nope_layer_interval-th
//             (rope_dim) and LongRoPE factors             layer unrotated
//   kGemma3   Gemma 3 text                     kGemma2   Gemma 3 without q/k norms, with attention
//                                                        and final logit soft-capping
//   kQwen3Moe Qwen3 whose FFN is a mixture of experts (n_experts)
//   kGptOss   gpt-oss: a mixture of experts (softmax over the top-k router logits, clamped SwiGLU,
//             biases on q/k/v/o, router and experts), per-head attention sinks, alternating
//             sliding-window layers
enum class Architecture { kLlama, kGemma3, kQwen3, kGemma2, kPhi3, kSmolLM3, kQwen3Moe, kGptOss };

// How a sequence's final hidden states become one embedding (fak/model/embedding.h): their mean,
// the last token's (decoder embedding models such as Qwen3-Embedding) or the first token's (CLS).
enum class Pooling { kMean, kLast, kCls };
// "llama", "gemma3", "qwen3", "gemma2", "phi3", "smollm3", "qwen3moe", "gpt-oss" (GGUF
// general.architecture; Qwen2 is "llama" with qkv_bias).
FAK_EXPORT const char* ArchitectureName(Architecture a);

struct FAK_EXPORT ModelConfig {
  Architecture architecture = Architecture::kLlama;
  size_t vocab_size = 0;
  size_t hidden_size = 0;
  size_t n_layers = 0;
  size_t n_heads = 0;
  size_t n_kv_heads = 0;      // grouped-query attention: n_heads % n_kv_heads == 0
  size_t head_dim = 0;        // Llama: hidden_size / n_heads
  // Rotated dimensions of each head (the first rope_dim of its head_dim; Phi-4-mini rotates 3/4 of
  // them); 0 means all of head_dim.
  size_t rope_dim = 0;
  size_t ffn_size = 0;
  double rope_base = 10000.0;
  RopePairing rope_pairing = RopePairing::kSplitHalf;
  // RoPE frequency scaling, as llama.cpp and HF apply it (docs/models.md "RoPE scaling"): inverse
  // frequency i is base^(-2i/head_dim) / rope_scale_factor / rope_freq_factors[i].
  // - linear (GGUF rope.scaling.type "linear", HF rope_type "linear"): positions divided by
  //   rope_scale_factor (1: none).
  // - llama3 (Llama 3.1-3.3): head_dim/2 per-frequency divisors, GGUF rope_freqs.weight or computed
  //   from HF's rope_scaling by Llama3RopeFreqFactors (empty: none).
  // - yarn (GGUF rope.scaling.type "yarn", HF rope_type "yarn"; Qwen2.5 and others past their
  //   trained context): rope_yarn.factor > 0, see RopeYarn. Exclusive with the other two.
  // Gemma 3 scales its global layers only; sliding layers keep rope_local_base unscaled.
  double rope_scale_factor = 1.0;
  std::vector<float> rope_freq_factors;  // [RotaryDims()/2]; Phi-3's LongRoPE short or long factors too
  // cos/sin multiplied by it (GGUF rope.scaling.attn_factor: Phi-3 LongRoPE's attention factor;
  // YaRN has its own magnitude below).
  double rope_attn_factor = 1.0;
  // YaRN as llama.cpp's rope_yarn and transformers' _compute_yarn_parameters compute it: inverse
  // frequency i blends base^(-2i/d) / factor and base^(-2i/d) by a ramp over the dimensions between
  // the correction dims of beta_fast and beta_slow rotations in original_context positions, and
  // cos/sin are multiplied by `magnitude` (llama.cpp: attn_factor * (1 + 0.1 ln factor); HF:
  // attention_factor, default 1 + 0.1 ln factor).
  struct RopeYarn {
    double factor = 0.0;  // 0: no YaRN
    size_t original_context = 0;
    double beta_fast = 32.0, beta_slow = 1.0;
    double magnitude = 1.0;
  } rope_yarn;
  float rms_eps = 1e-5f;
  bool tied_embeddings = true;  // the output head reuses the token embedding
  size_t context_length = 2048;
  int32_t bos_id = -1, eos_id = -1;  // -1: none
  // Llama family only: the q/k/v projections add a bias before RoPE (Qwen2: GGUF "qwen2", HF
  // model_type "qwen2"; otherwise a Llama with split-half RoPE).
  bool qkv_bias = false;
  // SmolLM3: layer l attends without RoPE (its keys and queries unrotated) iff
  // (l + 1) % nope_layer_interval == 0; 0: every layer rotates.
  size_t nope_layer_interval = 0;
  // Gemma 2 soft-capping, 0 = none: each attention score s (after scaling) becomes
  // attn_logit_softcap · tanh(s / attn_logit_softcap) before the softmax, each output logit z
  // final_logit_softcap · tanh(z / final_logit_softcap).
  float attn_logit_softcap = 0.0f;
  float final_logit_softcap = 0.0f;
  // Mixture of experts (Qwen3-MoE, gpt-oss; n_experts == 0: the dense FFN of ffn_size). A token's
  // router logits pick its n_experts_used most probable experts (ties: the lower index), each a gated
  // FFN of expert_ffn_size; their outputs are summed, most probable first, weighted by their
  // probabilities renormalised to sum to 1 (Qwen3-MoE: softmax over all experts, then the chosen
  // ones' share; gpt-oss: softmax over the chosen logits). Routing reads the token's own row only.
  size_t n_experts = 0, n_experts_used = 0, expert_ffn_size = 0;
  // The pooling the model was trained to embed with (GGUF <arch>.pooling_type: 1 mean, 2 cls,
  // 3 last); a generative model names none and gets mean. Not part of WeightsDigest: it changes no
  // forward pass.
  Pooling pooling = Pooling::kMean;

  // ---- Gemma 2 / 3 and gpt-oss (ignored for the Llama family) ----
  // Sliding-window attention: layer l is global iff (l + 1) % sliding_window_pattern == 0, else it
  // attends to keys at positions [max(0, p + 1 - sliding_window), p] (Gemma: rotating with
  // rope_local_base; gpt-oss: with the global table). sliding_window == 0: every layer is global.
  // (Gemma 2 and gpt-oss: pattern 2, so the even layers slide, as llama.cpp's set_swa_pattern(2).)
  size_t sliding_window = 0;
  size_t sliding_window_pattern = 6;
  double rope_local_base = 10000.0;
  // Attention scale = query_pre_attn_scalar^-0.5; 0 means head_dim.
  float query_pre_attn_scalar = 0.0f;
  // Whether layer l uses the sliding window (Gemma or gpt-oss with sliding_window > 0, l not global).
  bool IsSlidingLayer(size_t layer) const;
  // Whether layer l rotates its keys and queries (all but SmolLM3's NoPE layers).
  bool IsRopeLayer(size_t layer) const;
  // Gemma 2 and 3: embeddings × sqrt(hidden), sandwich norms, GELU-tanh gating, norm weights that
  // hold (1 + w) in GGUF.
  bool IsGemma() const { return architecture == Architecture::kGemma3 || architecture == Architecture::kGemma2; }
  // Gemma 2 / 3 and gpt-oss: some layers attend through a sliding window.
  bool HasSlidingLayers() const { return IsGemma() || architecture == Architecture::kGptOss; }
  // Gemma 3 and Qwen3: each head's query and key RMS-normalised (q_norm, k_norm) before RoPE.
  bool HasQkNorm() const {
    return architecture == Architecture::kGemma3 || architecture == Architecture::kQwen3 ||
           architecture == Architecture::kQwen3Moe;
  }
  // rope_dim, or head_dim when it is 0.
  size_t RotaryDims() const { return rope_dim == 0 ? head_dim : rope_dim; }

  // InvalidArgument naming the first inconsistent field.
  Status Validate() const;
  bool HasRopeScaling() const {
    return rope_scale_factor != 1.0 || !rope_freq_factors.empty() || rope_yarn.factor != 0.0 || rope_attn_factor != 1.0;
  }
  // The scaling as the cache binding's position_convention.scaling names it: "none", "linear 8",
  // "llama3 <sha256 of the f32 factors>" ("longrope …" for Phi-3), "attn 1.19", joined by " + ", or
  // "yarn 4 orig 32768 beta 32/1 mag 1.1386".
  std::string RopeScalingLabel() const;
  // A compact description, e.g. "llama h576 L30 heads 9/3 hd64 ffn1536 vocab49152".
  std::string Describe() const;

  // The embedded default: small enough to run anywhere in milliseconds, byte-level vocabulary.
  static ModelConfig EmbeddedDefault();
  // Real-model shapes (random weights) for benchmarks.
  static ModelConfig SmolLM2_135M_Shape();
  static ModelConfig TinyLlama_1_1B_Shape();
};

// The most threads one forward pass may use (ModelOptions::n_threads): far more than any CPU has,
// few enough that asking for more is a mistake to report rather than a crash when the OS refuses
// the threads (every surface — the C API, Python, the fak tool, fak serve — loads through here).
inline constexpr size_t kMaxModelThreads = 1024;

// The KV dtype of the serving surfaces (fak serve / run / chat, the C API, Python) when neither
// the caller nor FAK_KV_DTYPE names one: f16 halves the cache, decodes at least as fast at depth
// and keeps every witness exact inside its regime (docs/kv-regimes.md). The library's default
// stays f32, the regime its references (oracle, fixtures, certificates) are stated in.
inline constexpr KVDtype kServingKVDtype = KVDtype::kF16;

struct ModelOptions {
  // Threads used by one forward pass, at most kMaxModelThreads (more is InvalidArgument naming the
  // limit). Default: 0 = one per hardware thread (capped at kMaxModelThreads).
  size_t n_threads = 0;
  // Load only: cap the context length (RoPE tables and the cache limit) below the file's trained
  // context. Default: 0 = the file's value.
  size_t max_context = 0;
  // The element type of K, Kraw and V in this model's caches (f32, or f16 / bf16 at half the
  // bytes): part of the numeric regime and of the binding's precision axis (docs/kv-regimes.md).
  // Default: unset = the environment variable FAK_KV_DTYPE (f32|f16|bf16) when set, else
  // default_kv_dtype.
  std::optional<KVDtype> kv_dtype = std::nullopt;
  // The KV dtype when neither kv_dtype nor FAK_KV_DTYPE names one. Default: f32, the library's
  // regime; the serving surfaces (fak serve, run, chat, the C API, Python) set kServingKVDtype.
  KVDtype default_kv_dtype = KVDtype::kF32;
};

// What a cache keeps of layers that read only a window of recent positions.
enum class KVMemory {
  kFull,           // every row of every layer: any cut, clone or radix insert works
  kSlidingWindow,  // a sliding layer keeps its window only (same logits, memory bounded by it)
};

enum class LogitsMode {
  kNone,  // fill the cache only
  kLast,  // logits of the last prompt token: [vocab]
  kAll,   // logits of every prompt token: [n_tokens][vocab]
  // Every prompt token's final hidden state after the output norm (the vectors the output head
  // reads), no logits: [n_tokens][hidden_size]. What embeddings pool (fak/model/embedding.h).
  kHidden,
};

// One sequence of Model::PrefillBatch: tokens appended to its own cache.
struct BatchItem {
  KVCache* cache = nullptr;
  std::span<const int32_t> tokens;
  LogitsMode mode = LogitsMode::kLast;
};

class FAK_EXPORT Model {
 public:
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Deterministic random weights with sensible scales (outputs depend on context). Same config
  // and seed, same weights, on every machine.
  static Result<std::unique_ptr<Model>> Synthetic(const ModelConfig& config, uint64_t seed,
                                                  const ModelOptions& options = {});

  // Loads a GGUF file (v2/v3; architectures llama, qwen2, qwen3, qwen3moe, phi3, smollm3, gemma2, gemma3:
  // docs/models.md; tensors F32, F16, BF16, Q8_0,
  // Q4_0, Q5_0, Q4_K, Q5_K, Q6_K) or a Hugging Face checkpoint: a directory with config.json and
  // model.safetensors (or shards listed in model.safetensors.index.json), or a .safetensors file
  // with config.json beside it (LlamaForCausalLM, Qwen2ForCausalLM, Gemma3ForCausalLM; F32, F16, BF16). F32 and
  // quantized weights stay in the memory-mapped files, which the model keeps open; F16/BF16
  // matrices are widened to f32 at load (twice their file size). docs/models.md has the details.
  // Errors: IOError (cannot map), NotFound (no config.json or weights file), Corruption (malformed
  // file, a missing tensor or a wrong shape, naming the tensor), Unsupported (another architecture,
  // format, feature or tensor type).
  static Result<std::unique_ptr<Model>> Load(const std::string& path, const ModelOptions& options = {});

  const ModelConfig& config() const;
  // sha256 over the config and every weight: the ModelID axis of the cache binding. Computed
  // once, on first call (cost: one pass over the weights).
  const Digest& WeightsDigest() const;
  size_t weights_bytes() const;

  // An empty cache bound to this model's shape, RoPE convention and KV dtype. kSlidingWindow: its
  // sliding-window layers (Gemma 3) keep only the rows their queries still read (kv_cache.h); same
  // logits, bounded memory, no cut back past the window (docs/kv-regimes.md).
  KVCache NewCache(KVMemory memory = KVMemory::kFull) const;
  // The element type of this model's caches (ModelOptions::kv_dtype).
  KVDtype kv_dtype() const;
  // True when `cache` was made by this model's NewCache (same shape and RoPE binding): the only
  // caches Prefill accepts and the gate binds to this model.
  bool Owns(const KVCache& cache) const;
  // The distinct storage types of the weights, sorted and joined by '+' ("f32", "f32+q4_k+q8_0"):
  // part of the cache binding's precision axis.
  std::string WeightDTypes() const;

  // Appends `tokens` to `cache` as one batch and returns logits as `mode` asks. Errors (cache of
  // another model, empty prompt, token id out of range, context overflow) leave the cache as it was.
  Result<std::vector<float>> Prefill(KVCache* cache, std::span<const int32_t> tokens,
                                     LogitsMode mode = LogitsMode::kLast) const;
  // Appends one token and returns the logits of the next.
  Result<std::vector<float>> Decode(KVCache* cache, int32_t token) const;
  // Several sequences in one forward pass (continuous batching: a server's decode step for all its
  // sessions, or several prompts at once): every matmul, the output head included, reads its
  // weights once for all their rows, while attention runs per sequence over its own cache. Result
  // i has the bits Prefill(items[i].cache, items[i].tokens, items[i].mode) gives, whatever the other
  // items (batch independence, architecture §2.1). Every item is checked before any cache changes
  // (Prefill's errors, naming the item, plus a cache that appears twice); on error none changes.
  Result<std::vector<std::vector<float>>> PrefillBatch(std::span<const BatchItem> items) const;

 private:
  friend class internal::ModelAccess;
  explicit Model(std::unique_ptr<internal::ModelImpl> impl);
  std::unique_ptr<internal::ModelImpl> impl_;
};

}  // namespace fak

#endif  // FAK_MODEL_MODEL_H_
