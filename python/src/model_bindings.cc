// fak.Model (load, tokenize, detokenize, configuration) and fak.ChatTemplate (render).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>


#include "bindings.h"
#include "py_engine.h"

namespace fak::python {
namespace {

// The library's bundle (fak/model/loaded_model.h): every name the fak tool accepts. A model
// without a chat template still loads; sessions, tokens and engines with token prompts work, and
// chat calls say why they cannot. The KV dtype: `kv_dtype` when given, else FAK_KV_DTYPE, else the
// serving default (f16, docs/kv-regimes.md).
Result<ModelRef> Load(const std::string& spec, size_t n_threads, size_t max_context, uint64_t seed,
                      const std::optional<std::string>& kv_dtype) {
  LoadOptions options;
  options.model.n_threads = n_threads;
  options.model.max_context = max_context;
  options.model.default_kv_dtype = kServingKVDtype;
  if (kv_dtype) {
    options.model.kv_dtype = ParseKVDtype(*kv_dtype);
    if (!options.model.kv_dtype) return InvalidArgument("kv_dtype '" + *kv_dtype + "': expected 'f16', 'f32' or 'bf16'");
  }
  options.seed = seed;
  FAK_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(spec, options));
  return std::make_shared<ModelHandle>(std::move(loaded));
}

std::string TextOf(const nb::handle& text) {
  if (nb::isinstance<nb::bytes>(text)) {
    nb::bytes b = nb::borrow<nb::bytes>(text);
    return std::string(b.c_str(), b.size());
  }
  if (nb::isinstance<nb::str>(text)) return Utf8Of(text, "text");
  throw StatusError(InvalidArgument("text: expected str or bytes"));
}

nb::dict ConfigDict(const ModelConfig& c) {
  nb::dict d;
  d["architecture"] = ArchitectureName(c.architecture);
  d["vocab_size"] = c.vocab_size;
  d["hidden_size"] = c.hidden_size;
  d["n_layers"] = c.n_layers;
  d["n_heads"] = c.n_heads;
  d["n_kv_heads"] = c.n_kv_heads;
  d["head_dim"] = c.head_dim;
  d["ffn_size"] = c.ffn_size;
  d["context_length"] = c.context_length;
  d["bos_id"] = c.bos_id;
  d["eos_id"] = c.eos_id;
  d["rope_base"] = c.rope_base;
  return d;
}

}  // namespace

const Tokenizer& ModelHandle::RequireTokenizer() const {
  if (!tokenizer) throw StatusError(FailedPrecondition("model " + label + " has no tokenizer"));
  return *tokenizer;
}

const ChatTemplate& ModelHandle::RequireTemplate() const {
  if (!chat_template) {
    throw StatusError(FailedPrecondition("model " + label + " has no chat template fak can render (" +
                                         (template_status.ok() ? "none loaded" : template_status.ToString()) +
                                         "); render prompts yourself"));
  }
  return *chat_template;
}

std::vector<ChatMessage> ParseMessages(const nb::handle& messages) {
  if (!nb::isinstance<nb::sequence>(messages) || nb::isinstance<nb::str>(messages))
    throw StatusError(InvalidArgument("messages: expected a list of {'role': ..., 'content': ...} dicts"));
  std::vector<ChatMessage> out;
  size_t i = 0;
  for (nb::handle item : messages) {
    const std::string where = "messages[" + std::to_string(i++) + "]";
    if (!nb::isinstance<nb::dict>(item)) throw StatusError(InvalidArgument(where + ": expected a dict"));
    nb::dict d = nb::borrow<nb::dict>(item);
    if (!d.contains("role")) throw StatusError(InvalidArgument(where + ": no 'role'"));
    if (!nb::isinstance<nb::str>(d["role"])) throw StatusError(InvalidArgument(where + ".role: expected str"));
    Result<ChatRole> role = ParseChatRole(Utf8Of(d["role"], where + ".role"));
    if (!role.has_value()) throw StatusError(role.error().WithContext(where + ".role: "));
    ChatMessage msg{*role, {}};
    if (d.contains("content") && !d["content"].is_none()) {
      if (!nb::isinstance<nb::str>(d["content"])) throw StatusError(InvalidArgument(where + ".content: expected str"));
      msg.content = Utf8Of(d["content"], where + ".content");
    }
    for (const char* key : {"tool_call_id", "name"}) {
      if (!d.contains(key) || d[key].is_none()) continue;
      if (!nb::isinstance<nb::str>(d[key])) throw StatusError(InvalidArgument(where + "." + key + ": expected str"));
      (std::string_view(key) == "name" ? msg.name : msg.tool_call_id) = Utf8Of(d[key], where + "." + key);
    }
    // OpenAI's tool_calls: [{"id", "type": "function", "function": {"name", "arguments": JSON text}}].
    if (d.contains("tool_calls") && !d["tool_calls"].is_none()) {
      const std::string calls_where = where + ".tool_calls";
      if (!nb::isinstance<nb::sequence>(d["tool_calls"])) throw StatusError(InvalidArgument(calls_where + ": expected a list"));
      for (nb::handle c : d["tool_calls"]) {
        if (!nb::isinstance<nb::dict>(c)) throw StatusError(InvalidArgument(calls_where + ": expected dicts"));
        nb::dict call = nb::borrow<nb::dict>(c);
        if (!call.contains("function") || !nb::isinstance<nb::dict>(call["function"]))
          throw StatusError(InvalidArgument(calls_where + ": each call needs a 'function' dict"));
        nb::dict f = nb::borrow<nb::dict>(call["function"]);
        ChatToolCall tc;
        if (call.contains("id") && nb::isinstance<nb::str>(call["id"])) tc.id = Utf8Of(call["id"], calls_where + ".id");
        if (!f.contains("name") || !nb::isinstance<nb::str>(f["name"]))
          throw StatusError(InvalidArgument(calls_where + ".function.name: expected str"));
        tc.name = Utf8Of(f["name"], calls_where + ".function.name");
        tc.arguments = "{}";
        if (f.contains("arguments") && !f["arguments"].is_none()) {
          if (!nb::isinstance<nb::str>(f["arguments"]))
            throw StatusError(InvalidArgument(calls_where + ".function.arguments: expected JSON text (str)"));
          tc.arguments = Utf8Of(f["arguments"], calls_where + ".function.arguments");
        }
        msg.tool_calls.push_back(std::move(tc));
      }
    }
    out.push_back(std::move(msg));
  }
  return out;
}

void BindModel(nb::module_& m) {
  nb::class_<ChatTemplate>(m, "ChatTemplate",
                           "A model's chat template, rendered by fak's Jinja interpreter byte for byte as "
                           "jinja2 renders its source (six recognised families take a proven-identical fast "
                           "path; docs/chat-templates.md).")
      .def_prop_ro("family", [](const ChatTemplate& t) { return std::string(t.family()); })
      .def_prop_ro("variant", [](const ChatTemplate& t) { return std::string(t.variant()); })
      .def_prop_ro(
          "source", [](const ChatTemplate& t) { return std::string(t.source()); },
          "Where the template came from (e.g. 'tokenizer.chat_template').")
      .def_prop_ro("prefix_stable", &ChatTemplate::prefix_stable,
                   "Whether a longer conversation renders with the shorter one as its prefix (radix reuse).")
      .def_prop_ro("end_of_turn",
                   [](const ChatTemplate& t) {
                     return std::vector<std::string>(t.end_of_turn().begin(), t.end_of_turn().end());
                   })
      .def(
          "render",
          [](const ChatTemplate& t, const nb::handle& messages, bool add_generation_prompt) {
            std::vector<ChatMessage> msgs = ParseMessages(messages);
            return ValueOrThrow(t.Render(msgs, add_generation_prompt)).text;
          },
          nb::arg("messages"), nb::arg("add_generation_prompt") = true,
          "Renders [{'role', 'content'}, ...] as the model was trained to see it.");

  nb::class_<ModelHandle>(m, "Model",
                          "An immutable model (weights, tokenizer, chat template), shared by its sessions and engines. "
                          "Thread-safe.")
      .def_static(
          "load",
          [](const Text& path, size_t threads, size_t max_context, uint64_t seed, const std::optional<std::string>& kv_dtype) {
            Result<ModelRef> loaded = [&] {
              nb::gil_scoped_release release;
              return Load(path, threads, max_context, seed, kv_dtype);
            }();
            return ValueOrThrow(std::move(loaded));
          },
          nb::arg("path"), nb::arg("threads") = 0, nb::arg("max_context") = 0, nb::arg("seed") = 2026,
          nb::arg("kv_dtype") = nb::none(),
          "Loads a model as the fak tool names it: a GGUF file or Hugging Face checkpoint, 'embedded' (the embedded "
          "default model: synthetic weights, byte tokenizer), 'embedded:SEED' (the same with the weights of SEED) or "
          "'shape:smollm2-135m' / 'shape:tinyllama-1.1b' (random weights of a real shape, no tokenizer). seed: the "
          "synthetic weights of 'embedded' and the shapes. threads: per forward pass, 0 = one per hardware thread. "
          "The chat template is the file's own, else its architecture's family, else 'fak' for the embedded model. "
          "kv_dtype: the KV cache's element type, 'f16', 'f32' or 'bf16'; None = FAK_KV_DTYPE when set, else 'f16' "
          "(half f32's bytes; exact inside its regime: docs/kv-regimes.md).")
      .def_static(
          "embedded",
          [](size_t threads) {
            Result<ModelRef> loaded = [&] {
              nb::gil_scoped_release release;
              return Load("embedded", threads, 0, kEmbeddedSeed, std::nullopt);
            }();
            return ValueOrThrow(std::move(loaded));
          },
          nb::arg("threads") = 0, "The embedded default model (same as Model.load('embedded')).")
      .def_prop_ro("label", [](const ModelHandle& h) { return h.label; })
      .def_prop_ro("config", [](const ModelHandle& h) { return ConfigDict(h.model->config()); })
      .def("describe", [](const ModelHandle& h) { return h.model->config().Describe(); })
      .def_prop_ro("vocab_size", [](const ModelHandle& h) { return h.model->config().vocab_size; })
      .def_prop_ro("context_length", [](const ModelHandle& h) { return h.model->config().context_length; })
      .def_prop_ro("pooling", [](const ModelHandle& h) { return std::string(PoolingName(h.model->config().pooling)); },
                   "How embed pools by default: the model file's pooling_type ('mean', 'last' or 'cls'), else 'mean'.")
      .def_prop_ro("bos_id",
                   [](const ModelHandle& h) { return h.tokenizer ? h.tokenizer->bos_id() : h.model->config().bos_id; })
      .def_prop_ro("eos_id",
                   [](const ModelHandle& h) { return h.tokenizer ? h.tokenizer->eos_id() : h.model->config().eos_id; })
      .def_prop_ro("weight_dtypes", [](const ModelHandle& h) { return h.model->WeightDTypes(); })
      .def_prop_ro(
          "kv_dtype", [](const ModelHandle& h) { return std::string(KVDtypeName(h.model->kv_dtype())); },
          "The KV cache's element type: 'f16', 'f32' or 'bf16'.")
      .def_prop_ro(
          "weights_digest",
          [](const ModelHandle& h) {
            nb::gil_scoped_release release;  // one pass over the weights on first call
            return h.model->WeightsDigest().Hex();
          },
          "sha256 over config and weights: the ModelID axis of every cache binding.")
      .def_prop_ro(
          "chat_template_error",
          [](const ModelHandle& h) -> std::optional<std::string> {
            if (h.chat_template) return std::nullopt;
            return h.template_status.ok() ? std::string("none loaded") : h.template_status.ToString();
          },
          "Why chat_template is None (the loader's error), or None when there is a template.")
      .def_prop_ro("has_tokenizer", [](const ModelHandle& h) { return h.tokenizer != nullptr; })
      .def_prop_ro("tokenizer_id", [](const ModelHandle& h) { return h.RequireTokenizer().id().Hex(); })
      .def_prop_ro(
          "chat_template", [](const ModelHandle& h) { return h.chat_template; },
          "The model's ChatTemplate, or None when it has none fak can render (chat_template_error says why).")
      .def(
          "tokenize",
          [](const ModelHandle& h, const nb::handle& text, bool add_bos) {
            const Tokenizer& tok = h.RequireTokenizer();
            std::string bytes = TextOf(text);
            std::vector<int32_t> ids = ValueOrThrow(tok.Encode(bytes));
            if (add_bos && tok.bos_id() >= 0) ids.insert(ids.begin(), tok.bos_id());
            return ids;
          },
          nb::arg("text"), nb::arg("add_bos") = false,
          "Token ids of text (str or bytes); special-token texts become their ids. add_bos prepends BOS.")
      .def(
          "detokenize",
          [](const ModelHandle& h, const std::vector<int32_t>& ids) {
            std::string bytes = ValueOrThrow(h.RequireTokenizer().Decode(ids));
            return nb::steal<nb::str>(PyUnicode_DecodeUTF8(bytes.data(), bytes.size(), "replace"));
          },
          nb::arg("ids"), "The text of ids (invalid UTF-8, e.g. half a character, becomes U+FFFD).")
      .def(
          "detokenize_bytes",
          [](const ModelHandle& h, const std::vector<int32_t>& ids) {
            std::string bytes = ValueOrThrow(h.RequireTokenizer().Decode(ids));
            return nb::bytes(bytes.data(), bytes.size());
          },
          nb::arg("ids"), "The exact bytes of ids.")
      .def(
          "embed",
          [](ModelHandle& h, const std::vector<int32_t>& ids, std::optional<std::string> pooling, bool normalize) {
            EmbedParams params{h.model->config().pooling, normalize};
            if (pooling) params.pooling = ValueOrThrow(ParsePooling(*pooling));
            EngineRequest request;
            request.prompt = ids;
            request.embed = params;
            Result<EngineResult> result = [&]() -> Result<EngineResult> {
              nb::gil_scoped_release release;
              Engine& engine = h.DefaultEngine().engine();
              FAK_ASSIGN_OR_RETURN(RequestId id, engine.Submit(std::move(request)));
              return engine.Wait(id);
            }();
            EngineResult r = ValueOrThrow(std::move(result));
            if (r.finish == FinishReason::kError) throw StatusError(r.error);
            if (r.finish != FinishReason::kStopToken)
              throw StatusError(Unavailable("embed: the request ended " + std::string(FinishReasonName(r.finish))));
            return LogitsArray(std::move(r.embedding));
          },
          nb::arg("ids"), nb::arg("pooling") = nb::none(), nb::arg("normalize") = true,
          "The embedding of ids: the model's final hidden states after its output norm, pooled ('mean', 'last' or "
          "'cls'; None: the model's own, mean unless its file names another) and scaled to unit length unless "
          "normalize=False. Runs as an embedding request of the model's engine, batched with its other work; "
          "what `fak serve` answers on /v1/embeddings. A float32 array of the hidden size.")
      .def(
          "encode_chat",
          [](const ModelHandle& h, const nb::handle& messages, bool add_generation_prompt) {
            std::vector<ChatMessage> msgs = ParseMessages(messages);
            RenderedChat rendered = ValueOrThrow(h.RequireTemplate().Render(msgs, add_generation_prompt));
            return ValueOrThrow(EncodeRendered(h.RequireTokenizer(), rendered));
          },
          nb::arg("messages"), nb::arg("add_generation_prompt") = true,
          "Token ids of a rendered conversation: markup special tokens become their ids, message text never does.")
      .def(
          "create_chat_completion",
          [](nb::handle self, nb::args args, nb::kwargs kwargs) {
            return nb::module_::import_("fak._chat").attr("model_chat_completion")(self, *args, **kwargs);
          },
          nb::sig(kChatCompletionSignature),
          "A chat completion on the model's own engine, shaped like llama-cpp-python's (see "
          "fak.create_chat_completion).")
      .def_prop_ro(
          "engine", [](ModelHandle& h) -> PyEngine& { return h.DefaultEngine(); }, nb::rv_policy::reference_internal,
          "The Engine create_chat_completion uses when called on the model itself (made on first use).")
      .def_prop_ro(
          "end_of_generation_tokens",
          [](const ModelHandle& h) { return EndOfGenerationTokens(h.RequireTokenizer(), h.chat_template.get()); },
          "EOS and the chat template's end-of-turn ids.");
}

}  // namespace fak::python
