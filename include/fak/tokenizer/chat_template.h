// ChatTemplate: a conversation rendered as the model was trained to see it.
//
// A model ships its chat template as Jinja (GGUF `tokenizer.chat_template`, HF
// `tokenizer_config.json` `chat_template`). fak renders any template in the subset Hugging Face
// templates use with its own Jinja interpreter, as Python jinja2 renders it under transformers'
// settings (tests/tokenizer/jinja_test.cc checks 31 real templates against jinja2). Six families
// it also recognises — Gemma (2/3), Llama 3.x, ChatML (Qwen2/2.5, SmolLM2), Mistral / Llama 2
// `[INST]`, Phi-3 — and renders by hand, a fast path the tests prove identical to the
// interpreter's rendering of the same template. A template outside the subset is Unsupported,
// naming the construct and its line; it never falls back silently. A file that carries no
// template may be given its family from `general.architecture` — source() then says so.
//
// Rendered text contains special-token text (e.g. "<bos>", "<start_of_turn>"): tokenize it with
// EncodeRendered or EncodePieces (the markup's special tokens become their single ids, a
// message's never do) and add no BOS of your own.
// Immutable and thread-safe.
#ifndef FAK_TOKENIZER_CHAT_TEMPLATE_H_
#define FAK_TOKENIZER_CHAT_TEMPLATE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak {

enum class ChatRole { kSystem, kUser, kAssistant, kTool };
FAK_EXPORT std::string_view ChatRoleName(ChatRole role);              // "system", "user", "assistant", "tool"
FAK_EXPORT Result<ChatRole> ParseChatRole(std::string_view name);     // InvalidArgument naming an unknown role

// A function call an assistant message made (an OpenAI `tool_calls` entry).
struct ChatToolCall {
  std::string id;         // the call's id, which the tool message answering it names
  std::string name;       // the function's name
  std::string arguments;  // the arguments: JSON text (an object), as the API carries them
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(ChatRole role, std::string content) : role(role), content(std::move(content)) {}

  ChatRole role = ChatRole::kUser;
  std::string content;
  // An assistant message's calls; a tool message's answer names its call (and the function).
  // Either is rendered through the template's own text (the interpreter), as `tool_calls`,
  // `tool_call_id` and `name`; a family given by name renders them only for `fak`.
  std::vector<ChatToolCall> tool_calls;
  std::string tool_call_id;
  std::string name;
};

// A rendered conversation: the text, and where each message's part of it begins.
struct FAK_EXPORT RenderedChat {
  std::string text;
  // message_offsets[i]: the byte where message i's part begins (its first byte that depends on
  // it; text before message 0's offset, e.g. BOS, belongs to message 0). generation_offset: where
  // the generation prompt begins (== text.size() when none was asked for).
  std::vector<size_t> message_offsets;
  size_t generation_offset = 0;
  // The bytes that are the messages' own content (sorted, disjoint), as opposed to the template's
  // markup: tokenized as ordinary text, so special-token texts in a message stay text.
  std::vector<TextSpan> content;

  // The text cut at those offsets: piece i is message i's (the first also holds what precedes
  // it), then the generation prompt (possibly empty). Their concatenation is `text`.
  std::vector<std::string> Pieces() const;
};

// Token ids of the whole rendering; the markup's special-token texts become their ids, the
// content's never do (Tokenizer::EncodeWithPlain).
FAK_EXPORT Result<std::vector<int32_t>> EncodeRendered(const Tokenizer& tokenizer, const RenderedChat& rendered);
// The same per piece (Pieces()), each tokenized on its own: segment boundaries are token
// boundaries. For the families whose pieces meet inside text (Mistral, Llama 2: see
// docs/chat-templates.md) the ids can differ from EncodeRendered's at the borders.
FAK_EXPORT Result<std::vector<std::vector<int32_t>>> EncodePieces(const Tokenizer& tokenizer, const RenderedChat& rendered);

// What a rendering may add to the messages.
struct ChatRenderOptions {
  bool add_generation_prompt = true;
  // The tools offered to the model: a JSON array of tool definitions as the OpenAI API's `tools`
  // ("" for none), the template's `tools` variable. Rendered through the template's own text
  // (the interpreter), never by a family's hand-written renderer.
  std::string tools_json;
  // Seconds since the epoch that the template's strftime_now() formats (UTC); absent: it is
  // undefined, and templates that guard it print their fixed default date (docs/chat-templates.md).
  std::optional<int64_t> now;
};

class ChatTemplate;
namespace internal {
// Renders through the Jinja interpreter even where a family's hand-written renderer would: how the
// tests prove the two identical. Not exported; Unsupported for a family given by name.
Result<RenderedChat> RenderWithInterpreter(const ChatTemplate& chat_template, std::span<const ChatMessage> messages,
                                           const ChatRenderOptions& options);
}  // namespace internal

class FAK_EXPORT ChatTemplate {
 public:
  // Parses `jinja_source` (and recognises it when it is one of the hand-rendered families).
  // `tokenizer` supplies the texts of BOS/EOS the template prints. Unsupported naming the
  // construct and line when it uses Jinja outside the subset, InvalidArgument for a syntax error.
  static Result<ChatTemplate> Recognize(std::string_view jinja_source, const Tokenizer& tokenizer);
  // The same with the texts the template prints for `bos_token` / `eos_token` given directly ("" for
  // none), e.g. from a tokenizer_config.json without the tokenizer at hand.
  static Result<ChatTemplate> Recognize(std::string_view jinja_source, std::string_view bos_text,
                                        std::string_view eos_text);
  // A family by name: "gemma", "llama3", "chatml", "mistral", "llama2", "phi3", and "fak" (the
  // embedded default model's own markers, `<|role|>\n...\n`); also the variants "gemma2",
  // "gemma3", "llama3.1", "llama3.2". InvalidArgument for another name.
  static Result<ChatTemplate> ForFamily(std::string_view family, const Tokenizer& tokenizer);
  // The template of a model file: a GGUF's tokenizer.chat_template, an HF checkpoint's
  // tokenizer_config.json chat_template (the list form: the one named "default") or
  // chat_template.jinja; when the file has none, the family its architecture (GGUF
  // general.architecture, HF config.json model_type) implies (gemma*, llama with a Llama 3
  // vocabulary, qwen2, phi3), else NotFound saying the file carries no template and how to give one.
  static Result<ChatTemplate> ForModel(const std::string& model_path, const Tokenizer& tokenizer);

  std::string_view family() const;   // e.g. "gemma"; "jinja" for a template rendered only by the interpreter
  std::string_view variant() const;  // e.g. "gemma3", "llama3.1", "qwen2.5", "mistral-v0.3"; "jinja"
  // The template's Jinja text ("" for a family given by name): what tool-call formats are read from.
  std::string_view jinja_source() const;
  // Where it came from: "tokenizer.chat_template" (GGUF), "tokenizer_config.json chat_template",
  // "chat_template.jinja", "general.architecture=gemma3" / "config.json model_type=qwen2" (inferred),
  // "family gemma" (ForFamily), "template source" (Recognize).
  std::string_view source() const;

  // Renders `messages` (with the prompt that opens the assistant's turn when
  // add_generation_prompt). InvalidArgument when the template would refuse the conversation
  // (e.g. Gemma's roles must alternate), naming the message. Tool messages use the template's
  // tool role, or where it has none the family's convention (docs/chat-templates.md).
  // ResourceExhausted when the template passes a bound on depth, output or loop iterations.
  Result<RenderedChat> Render(std::span<const ChatMessage> messages, bool add_generation_prompt = true) const;
  Result<RenderedChat> Render(std::span<const ChatMessage> messages, const ChatRenderOptions& options) const;

  // Whether rendering a conversation, then the same conversation plus the assistant's reply and a
  // next user turn, keeps the first rendering (minus its generation prompt) as a prefix — so the
  // radix tree reuses earlier turns. False for templates that move the system prompt into the
  // last user turn, for instance. For an interpreted template it is measured when the template
  // is made, on probe conversations (with and without a system message).
  bool prefix_stable() const;

  // Text of the tokens that end an assistant turn (e.g. "<end_of_turn>", "<|eot_id|>"); for an
  // interpreted template, the known turn-end markers its source prints (docs/chat-templates.md).
  std::span<const std::string> end_of_turn() const;

  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ChatTemplate(const ChatTemplate&);
  ChatTemplate& operator=(const ChatTemplate&);

  struct Spec;  // the family and variant details (src/tokenizer/chat_template.cc)

 private:
  friend Result<RenderedChat> internal::RenderWithInterpreter(const ChatTemplate&, std::span<const ChatMessage>,
                                                              const ChatRenderOptions&);
  explicit ChatTemplate(std::unique_ptr<Spec> spec);
  std::unique_ptr<Spec> spec_;
};

// The ids that end generation: EOS plus each end_of_turn() text the tokenizer has as one token
// (none from `chat_template` when it is null). Sorted, unique.
FAK_EXPORT std::vector<int32_t> EndOfGenerationTokens(const Tokenizer& tokenizer, const ChatTemplate* chat_template);

}  // namespace fak

#endif  // FAK_TOKENIZER_CHAT_TEMPLATE_H_
