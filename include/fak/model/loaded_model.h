// LoadedModel: one loaded model with what serving it needs beside its weights — its tokenizer and
// its chat template — and LoadModel, which builds one from a model name.
//
// Every surface loads models through LoadModel (the `fak` tool's MODEL, fak_model_load,
// fak.Model.load, a rollout's "model" in `fak serve`), so the names accepted and the chat template
// chosen are the same everywhere: a rollout's engine renders chats with the rolled-out model's own
// template, not the host's.
//
// Specs:
//   "embedded"        ModelConfig::EmbeddedDefault with synthetic weights from LoadOptions::seed
//                     (default kEmbeddedSeed, the demo's model), the byte tokenizer, chat family "fak"
//   "embedded:SEED"   the same with the weights of SEED (decimal), whatever LoadOptions::seed says
//   "shape:smollm2-135m", "shape:tinyllama-1.1b"
//                     real shapes with random weights (LoadOptions::seed); no tokenizer, no template
//   anything else     a path: a GGUF file or a Hugging Face checkpoint directory (Model::Load), its
//                     tokenizer (LoadTokenizerForModel), its chat template (ChatTemplate::ForModel)
//
// The chat template, one rule for every surface: the model file's own; else the family its
// architecture names (ChatTemplate::ForModel); else, for the embedded byte-tokenizer model, "fak".
// A model without one still loads (token-level use works); template_status says why it has none.
#ifndef FAK_MODEL_LOADED_MODEL_H_
#define FAK_MODEL_LOADED_MODEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fak/core/status.h"
#include "fak/model/model.h"
#include "fak/tokenizer/chat_template.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak {

// The seed of the embedded default model's synthetic weights (the demo's, the tool's "embedded").
inline constexpr uint64_t kEmbeddedSeed = 2026;

struct LoadOptions {
  // Threads, context cap and KV dtype of the model (ModelOptions). Default: defaults.
  ModelOptions model;
  // The synthetic weights' seed for "embedded" and the shape specs ("embedded:SEED" names its own).
  // Default: kEmbeddedSeed.
  uint64_t seed = kEmbeddedSeed;
};

// A model, its tokenizer and its chat template. Movable, not copyable; immutable once loaded, so a
// host may share one (e.g. through a shared_ptr<const LoadedModel>) between threads.
struct LoadedModel {
  std::unique_ptr<Model> model;
  // Null for the shape specs (random weights of a real shape, no vocabulary).
  std::unique_ptr<Tokenizer> tokenizer;
  // Shared so engines and planners built on the model can hold it. Null when the model has none;
  // template_status then says why.
  std::shared_ptr<const ChatTemplate> chat_template;
  // OK when chat_template is set; otherwise why there is none (e.g. NotFound: the file carries no
  // template and its architecture implies none).
  Status template_status;
  // How it was named, for messages and reports, e.g. "embedded (synthetic weights, seed 2026)".
  std::string label;

  // The chat template, or template_status (which names the model) when it has none.
  Result<std::shared_ptr<const ChatTemplate>> RequireChatTemplate() const;
};

// Loads `spec` (see the top of this file). Errors name the spec: InvalidArgument for a malformed
// "embedded:SEED", NotFound for a path that does not exist, and the loaders' errors (a corrupt
// file, an unsupported architecture, a checkpoint without a tokenizer) as they come.
Result<LoadedModel> LoadModel(std::string_view spec, const LoadOptions& options = {});

// Whether `spec` names a built-in model ("embedded", "embedded:...", a shape) rather than a path.
bool IsBuiltinModelSpec(std::string_view spec);

// The shape-only models' configurations by name; nullopt when `spec` is not one.
std::optional<ModelConfig> ShapeModelConfig(std::string_view spec);

}  // namespace fak

#endif  // FAK_MODEL_LOADED_MODEL_H_
