// LoadModel: a model name to the model, tokenizer and chat template that go together.
#include "fak/model/loaded_model.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <system_error>
#include <utility>

namespace fak {
namespace {

constexpr std::string_view kEmbedded = "embedded";
constexpr std::string_view kEmbeddedSeeded = "embedded:";

bool IsEmbeddedSpec(std::string_view spec) { return spec == kEmbedded || spec.starts_with(kEmbeddedSeeded); }

// The seed of "embedded" (options.seed) or "embedded:SEED".
Result<uint64_t> EmbeddedSeed(std::string_view spec, uint64_t default_seed) {
  if (spec == kEmbedded) return default_seed;
  const std::string_view digits = spec.substr(kEmbeddedSeeded.size());
  uint64_t seed = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), seed);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size())
    return InvalidArgument("model '" + std::string(spec) + "': expected embedded:SEED with a decimal SEED");
  return seed;
}

void SetTemplate(LoadedModel* loaded, Result<ChatTemplate> chat_template) {
  if (chat_template) {
    loaded->chat_template = std::make_shared<const ChatTemplate>(std::move(*chat_template));
  } else {
    // Not a load failure: sessions and token prompts still work; chat says why it cannot.
    loaded->template_status = chat_template.error();
  }
}

// A built-in model's configuration with the context capped as a file's would be (max_context).
ModelConfig Capped(ModelConfig config, const ModelOptions& options) {
  if (options.max_context > 0) config.context_length = std::min(config.context_length, options.max_context);
  return config;
}

}  // namespace

Result<std::shared_ptr<const ChatTemplate>> LoadedModel::RequireChatTemplate() const {
  if (chat_template) return chat_template;
  if (!template_status.ok()) return template_status;  // names the file, or the spec without a tokenizer
  return FailedPrecondition("model " + label + " has no chat template");
}

std::optional<ModelConfig> ShapeModelConfig(std::string_view spec) {
  if (spec == "shape:smollm2-135m") return ModelConfig::SmolLM2_135M_Shape();
  if (spec == "shape:tinyllama-1.1b") return ModelConfig::TinyLlama_1_1B_Shape();
  return std::nullopt;
}

bool IsBuiltinModelSpec(std::string_view spec) { return IsEmbeddedSpec(spec) || ShapeModelConfig(spec).has_value(); }

Result<LoadedModel> LoadModel(std::string_view spec, const LoadOptions& options) {
  LoadedModel loaded;
  if (IsEmbeddedSpec(spec)) {
    FAK_ASSIGN_OR_RETURN(const uint64_t seed, EmbeddedSeed(spec, options.seed));
    FAK_ASSIGN_OR_RETURN(loaded.model, Model::Synthetic(Capped(ModelConfig::EmbeddedDefault(), options.model), seed, options.model));
    loaded.tokenizer = MakeByteTokenizer();
    // The byte tokenizer has no file to carry a template; the embedded model speaks fak's own markers.
    SetTemplate(&loaded, ChatTemplate::ForFamily("fak", *loaded.tokenizer));
    loaded.label = "embedded (synthetic weights, seed " + std::to_string(seed) + ")";
    return loaded;
  }
  if (std::optional<ModelConfig> shape = ShapeModelConfig(spec)) {
    FAK_ASSIGN_OR_RETURN(loaded.model, Model::Synthetic(Capped(*shape, options.model), options.seed, options.model));
    loaded.label = std::string(spec) + " (random weights, no tokenizer)";
    loaded.template_status = FailedPrecondition("model '" + std::string(spec) + "' has no tokenizer, so no chat template");
    return loaded;
  }
  const std::string path(spec);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return NotFound("model '" + path +
                    "' is neither a known name (embedded, embedded:SEED, shape:smollm2-135m, shape:tinyllama-1.1b) "
                    "nor a file or directory");
  }
  FAK_ASSIGN_OR_RETURN(loaded.model, Model::Load(path, options.model));
  // GGUF metadata or tokenizer.json beside the checkpoint (its errors name the path).
  FAK_ASSIGN_OR_RETURN(loaded.tokenizer, LoadTokenizerForModel(path));
  SetTemplate(&loaded, ChatTemplate::ForModel(path, *loaded.tokenizer));
  loaded.label = path + " (" + loaded.model->config().Describe() + ")";
  return loaded;
}

}  // namespace fak
