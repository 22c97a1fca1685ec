// The C API's model, tokenizer and chat-template calls.
#include "src/c/c_api_internal.h"

namespace fak::capi {
namespace {

static_assert(FAK_MAX_MODEL_THREADS == kMaxModelThreads, "the C header's limit is the library's");

Result<std::shared_ptr<const LoadedModel>> Load(const fak_model_options& o) {
  LoadOptions options;
  options.model.n_threads = o.n_threads;
  options.model.max_context = o.max_context;
  options.seed = o.seed;
  options.model.default_kv_dtype = kServingKVDtype;
  if (o.kv_dtype != nullptr) {
    options.model.kv_dtype = ParseKVDtype(o.kv_dtype);
    if (!options.model.kv_dtype)
      return InvalidArgument(std::string("options.kv_dtype '") + o.kv_dtype + "': expected f16, f32 or bf16");
  }
  FAK_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(o.path == nullptr ? "embedded" : o.path, options));
  // Every call that takes a fak_model may tokenize; a model without a vocabulary is of no use here.
  if (!loaded.tokenizer)
    return FailedPrecondition(loaded.label + " has no tokenizer; fak_model_load needs a model with one");
  return std::make_shared<const LoadedModel>(std::move(loaded));
}

Result<std::vector<int32_t>> ChatTokens(const LoadedModel& m, const fak_chat_message* messages, size_t n_messages,
                                        int add_generation_prompt, RenderedChat* rendered) {
  if (m.chat_template == nullptr)
    return FailedPrecondition("the model has no chat template: " + std::string(m.template_status.message()));
  FAK_ASSIGN_OR_RETURN(std::vector<ChatMessage> chat, ReadMessages(messages, n_messages));
  FAK_ASSIGN_OR_RETURN(*rendered, m.chat_template->Render(chat, add_generation_prompt != 0));
  return EncodeRendered(*m.tokenizer, *rendered);
}

}  // namespace
}  // namespace fak::capi

using fak::Status;
using fak::capi::Guard;

extern "C" {

void fak_model_options_init(fak_model_options* options) {
  if (options == nullptr) return;
  *options = fak_model_options{};
  options->struct_size = sizeof(fak_model_options);
  options->seed = fak::kEmbeddedSeed;
}

fak_status fak_model_load(const fak_model_options* options, fak_model** out) {
  return Guard("fak_model_load", [&]() -> Status {
    FAK_C_REQUIRE(out);
    fak_model_options o;
    fak_model_options_init(&o);
    FAK_RETURN_IF_ERROR(fak::capi::ReadVersioned(options, &o, "options"));
    FAK_ASSIGN_OR_RETURN(std::shared_ptr<const fak::capi::LoadedModel> loaded, fak::capi::Load(o));
    *out = new fak_model{std::move(loaded)};
    return Status();
  });
}

void fak_model_free(fak_model* model) { delete model; }

fak_status fak_model_info_get(const fak_model* model, fak_model_info* info) {
  return Guard("fak_model_info_get", [&]() -> Status {
    FAK_C_REQUIRE(model);
    FAK_C_REQUIRE(info);
    const fak::capi::LoadedModel& m = *model->loaded;
    const fak::ModelConfig& c = m.model->config();
    fak_model_info full{};
    full.struct_size = sizeof(full);
    full.vocab_size = c.vocab_size;
    full.context_length = c.context_length;
    full.n_layers = c.n_layers;
    full.bos_id = m.tokenizer->bos_id();
    full.eos_id = m.tokenizer->eos_id();
    full.add_bos = m.tokenizer->add_bos() ? 1 : 0;
    fak::capi::WriteHex(m.model->WeightsDigest().Hex(), full.model_digest);
    const std::string_view kv = fak::KVDtypeName(m.model->kv_dtype());
    static_assert(sizeof(full.kv_dtype) > 4, "room for the longest name and its NUL");
    kv.copy(full.kv_dtype, kv.size());
    return fak::capi::WriteVersioned(full, info, "info");
  });
}

fak_status fak_tokenize(const fak_model* model, const char* text, size_t text_len, int32_t* tokens, size_t capacity,
                        size_t* n_tokens) {
  return Guard("fak_tokenize", [&]() -> Status {
    FAK_C_REQUIRE(model);
    if (text == nullptr && text_len > 0) return fak::capi::NullArgument("text");
    FAK_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                         model->loaded->tokenizer->Encode(std::string_view(text == nullptr ? "" : text, text_len)));
    return fak::capi::CopyOut<int32_t>(ids, tokens, capacity, n_tokens, "token ids");
  });
}

fak_status fak_detokenize(const fak_model* model, const int32_t* tokens, size_t n_tokens, char* text, size_t capacity,
                          size_t* n_bytes) {
  return Guard("fak_detokenize", [&]() -> Status {
    FAK_C_REQUIRE(model);
    if (tokens == nullptr && n_tokens > 0) return fak::capi::NullArgument("tokens");
    FAK_ASSIGN_OR_RETURN(std::string bytes, model->loaded->tokenizer->Decode(std::span<const int32_t>(tokens, n_tokens)));
    return fak::capi::CopyText(bytes, text, capacity, n_bytes, "the text");
  });
}

fak_status fak_chat_render(const fak_model* model, const fak_chat_message* messages, size_t n_messages,
                           int add_generation_prompt, char* text, size_t capacity, size_t* n_bytes) {
  return Guard("fak_chat_render", [&]() -> Status {
    FAK_C_REQUIRE(model);
    const fak::capi::LoadedModel& m = *model->loaded;
    if (m.chat_template == nullptr)
      return fak::FailedPrecondition("the model has no chat template: " + std::string(m.template_status.message()));
    FAK_ASSIGN_OR_RETURN(std::vector<fak::ChatMessage> chat, fak::capi::ReadMessages(messages, n_messages));
    FAK_ASSIGN_OR_RETURN(fak::RenderedChat rendered, m.chat_template->Render(chat, add_generation_prompt != 0));
    return fak::capi::CopyText(rendered.text, text, capacity, n_bytes, "the rendered conversation");
  });
}

fak_status fak_chat_tokenize(const fak_model* model, const fak_chat_message* messages, size_t n_messages,
                             int add_generation_prompt, int32_t* tokens, size_t capacity, size_t* n_tokens) {
  return Guard("fak_chat_tokenize", [&]() -> Status {
    FAK_C_REQUIRE(model);
    fak::RenderedChat rendered;
    FAK_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                         fak::capi::ChatTokens(*model->loaded, messages, n_messages, add_generation_prompt, &rendered));
    return fak::capi::CopyOut<int32_t>(ids, tokens, capacity, n_tokens, "token ids");
  });
}

}  // extern "C"
