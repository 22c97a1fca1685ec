// ChatTemplate: a model's Jinja chat template, rendered by fak's Jinja interpreter
// (src/tokenizer/jinja/) — or, when it is recognised as one of the families fak knows by the
// expressions that print its turns, by that family's hand-written renderer, a fast path with the
// same bytes (docs/chat-templates.md; tests/data/chat_templates/goldens.json).
#include "fak/tokenizer/chat_template.h"

#include <algorithm>
#include <utility>

#include "fak/core/env.h"
#include "fak/io/gguf.h"
#include "src/core/json.h"
#include "src/tokenizer/jinja/template.h"
#include "src/tokenizer/jinja/value.h"
#include "src/tokenizer/unicode.h"

namespace fak {

// kJinja: no family recognised; rendered by the interpreter alone.
enum class ChatFamily { kGemma, kLlama3, kChatml, kMistral, kLlama2, kPhi3, kFak, kJinja };

// Where a Mistral [INST] template puts the leading system message.
enum class SystemPlacement {
  kNone,            // it has none: a leading system message breaks the role alternation
  kFirstUser,       // prefixed to the first user turn
  kLastUserIfLast,  // prefixed to the user turn that ends the conversation, dropped otherwise
};

struct ChatTemplate::Spec {
  ChatFamily family = ChatFamily::kFak;
  std::string variant;
  std::string source;
  std::string bos, eos;  // what the template prints for bos_token / eos_token ("" when it prints none)
  std::vector<std::string> end_of_turn;
  // Which tool messages are rendered as user turns: the template has no tool role (it raises on
  // or drops one), so fak follows the family's convention (docs/chat-templates.md).
  bool tool_as_user = false;
  // Gemma 3: a leading system message prefixes the first user turn (Gemma 2 refuses it).
  bool system_folds = false;
  // Llama 3.1+: the system turn always printed first, opening with this preamble
  // ("Cutting Knowledge Date: …\nToday Date: …\n\n"); tool results are `ipython` turns whose
  // content is JSON-encoded.
  std::string system_preamble;
  bool tool_ipython = false;
  // ChatML: the system turn printed when the conversation does not start with one; Qwen2.5's
  // wrapping of tool results in <tool_response> inside a user turn.
  std::string default_system;
  bool tool_response = false;
  // Mistral [INST]: the turn delimiters, where the system message goes, and the assistant reply's
  // leading text and trimming.
  std::string inst_open, inst_close, reply_prefix;
  bool reply_trim = false;
  SystemPlacement system = SystemPlacement::kNone;
  // Phi-3.5 skips an empty system message; Phi-3 prints EOS when no generation prompt is asked.
  bool skip_empty_system = false;
  bool eos_without_prompt = false;
  // The parsed template (null for a family given by name): what kJinja renders with, and what a
  // family renders with when the rendering needs more than its hand-written form (tools, a date).
  std::shared_ptr<const jinja::Template> jinja;
  std::string jinja_text;  // its source text
  // kJinja: prefix_stable() as measured on probe conversations.
  bool probed_prefix_stable = false;
};

namespace {

constexpr std::string_view kFamilies = "gemma, llama3, chatml, mistral, llama2, phi3";

// ---- text helpers ----

// Python's str.isspace(), which Jinja's `trim` and str.strip() use.
bool IsPythonSpace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Jinja's `| trim` and Python's str.strip(): Unicode whitespace off both ends.
std::string Trim(std::string_view s) {
  std::vector<internal::CodePoint> cps = internal::DecodeUtf8(s);
  size_t b = 0, e = cps.size();
  while (b < e && IsPythonSpace(cps[b].cp)) ++b;
  while (e > b && IsPythonSpace(cps[e - 1].cp)) --e;
  if (b == e) return {};
  return std::string(s.substr(cps[b].offset, cps[e - 1].offset + cps[e - 1].len - cps[b].offset));
}

// Python's json.dumps(s, ensure_ascii=False) of a string, as transformers' `tojson` filter prints it.
std::string JsonString(std::string_view s) {
  std::string out;
  jinja::AppendJsonString(s, out);
  return out;
}

bool Contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

void ReplaceAll(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
}

// The template source without the spellings that do not change what it renders: one kind of
// quote, no whitespace, no "\n" escapes (a newline may be written either way inside a string), no
// whitespace-control dashes, `message.role` as `message['role']`. Recognition compares these forms.
std::string Squash(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    char c = src[i];
    if (c == '\\' && i + 1 < src.size() && src[i + 1] == 'n') {
      ++i;
    } else if (c == '"') {
      out += '\'';
    } else if (c != ' ' && c != '\n' && c != '\t' && c != '\r') {
      out += c;
    }
  }
  for (auto [from, to] : {std::pair{"{{-", "{{"}, {"-}}", "}}"}, {"{%-", "{%"}, {"-%}", "%}"}}) ReplaceAll(out, from, to);
  ReplaceAll(out, "message.role", "message['role']");
  ReplaceAll(out, "message.content", "message['content']");
  return out;
}

// Whether the squashed source holds every one of `parts` (squashed the same way).
bool HasAll(std::string_view squashed, std::initializer_list<std::string_view> parts) {
  return std::all_of(parts.begin(), parts.end(), [&](std::string_view p) { return Contains(squashed, Squash(p)); });
}

// The literal text after `head` up to `end`, with `head` followed by a newline written either as
// "\n" or as itself; "" when absent or when it is not plain text (an expression, an escape).
std::string LiteralAfter(std::string_view src, std::string_view head, std::string_view end) {
  for (size_t at = src.find(head); at != std::string_view::npos; at = src.find(head, at + 1)) {
    size_t p = at + head.size();
    if (src.substr(p, 2) == "\\n") {
      p += 2;
    } else if (src.substr(p, 1) == "\n") {
      p += 1;
    } else {
      continue;
    }
    size_t e = src.find(end, p);
    if (e == std::string_view::npos) continue;
    std::string_view lit = src.substr(p, e - p);
    if (lit.find_first_of("'\"\\{}+") == std::string_view::npos) return std::string(lit);
  }
  return {};
}

// The single-line literal that follows `head` (up to a "\n" escape, a newline or a quote).
std::string LineAfter(std::string_view src, std::string_view head) {
  size_t at = src.find(head);
  if (at == std::string_view::npos) return {};
  size_t p = at + head.size();
  size_t e = src.find_first_of("\\\n'\"", p);
  return std::string(src.substr(p, e == std::string_view::npos ? std::string_view::npos : e - p));
}

// The first of `candidates` that appears quoted ('…' or "…") in `src`, else "".
std::string QuotedChoice(std::string_view src, std::initializer_list<std::string_view> candidates) {
  for (std::string_view c : candidates) {
    for (char q : {'\'', '"'}) {
      std::string quoted = q + std::string(c) + q;
      if (Contains(src, quoted)) return std::string(c);
    }
  }
  return {};
}

// ---- the family specs ----

ChatTemplate::Spec Base(ChatFamily family, std::string variant, std::string bos, std::string eos) {
  ChatTemplate::Spec s;
  s.family = family;
  s.variant = std::move(variant);
  s.bos = std::move(bos);
  s.eos = std::move(eos);
  return s;
}

ChatTemplate::Spec GemmaSpec(bool system_folds, std::string bos, std::string eos) {
  ChatTemplate::Spec s = Base(ChatFamily::kGemma, system_folds ? "gemma3" : "gemma2", std::move(bos), std::move(eos));
  s.system_folds = system_folds;
  s.tool_as_user = true;
  s.end_of_turn = {"<end_of_turn>"};
  return s;
}

constexpr std::string_view kLlama3Preamble = "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";

// `preamble` empty: Llama 3.0 (no system turn of its own, tool messages under their own role).
ChatTemplate::Spec Llama3Spec(std::string variant, std::string preamble, bool eom, std::string bos, std::string eos) {
  ChatTemplate::Spec s = Base(ChatFamily::kLlama3, std::move(variant), std::move(bos), std::move(eos));
  s.tool_ipython = !preamble.empty();
  s.system_preamble = std::move(preamble);
  s.end_of_turn = {"<|eot_id|>"};
  if (eom) s.end_of_turn.push_back("<|eom_id|>");  // 3.1 ends a built-in tool call with it
  return s;
}

ChatTemplate::Spec ChatmlSpec(std::string eos) {
  ChatTemplate::Spec s = Base(ChatFamily::kChatml, "chatml", "", std::move(eos));
  s.end_of_turn = {"<|im_end|>"};
  return s;
}

ChatTemplate::Spec MistralSpec(std::string variant, std::string bos, std::string eos) {
  ChatTemplate::Spec s = Base(ChatFamily::kMistral, std::move(variant), std::move(bos), std::move(eos));
  s.tool_as_user = true;
  if (!s.eos.empty()) s.end_of_turn = {s.eos};
  return s;
}

ChatTemplate::Spec Llama2Spec(std::string bos, std::string eos) {
  ChatTemplate::Spec s = Base(ChatFamily::kLlama2, "llama2", std::move(bos), std::move(eos));
  s.tool_as_user = true;
  if (!s.eos.empty()) s.end_of_turn = {s.eos};
  return s;
}

ChatTemplate::Spec Phi3Spec(std::string variant, std::string eos) {
  ChatTemplate::Spec s = Base(ChatFamily::kPhi3, std::move(variant), "", std::move(eos));
  s.tool_as_user = true;
  s.end_of_turn = {"<|end|>"};
  return s;
}

// ---- recognition ----

// The first 60 bytes of a template (cut at a character boundary), newlines shown as \n.
std::string Excerpt(std::string_view src) {
  size_t n = std::min<size_t>(src.size(), 60);
  while (n < src.size() && n > 0 && (static_cast<unsigned char>(src[n]) & 0xC0) == 0x80) --n;
  std::string out;
  for (char c : src.substr(0, n)) out += c == '\n' ? std::string("\\n") : std::string(1, c);
  return n < src.size() ? out + "…" : out;
}

// Why a template is none of the hand-rendered families; it then goes to the interpreter alone.
Status NotRecognised(std::string_view why) {
  return Unsupported("not a hand-rendered family: " + std::string(why));
}

bool StartsWithBos(std::string_view squashed) { return squashed.starts_with("{{bos_token}}"); }

Result<ChatTemplate::Spec> RecognizeGemma(std::string_view sq, std::string bos, std::string eos) {
  if (!HasAll(sq, {"set role = 'model'", "'<start_of_turn>' + role + '\\n'", "message['content'] | trim",
                   "(message['role'] == 'user') != (loop.index0 % 2 == 0)", "'<start_of_turn>model\\n'"})) {
    return NotRecognised("Gemma markers, but not the Gemma turn structure");
  }
  const bool folds = HasAll(sq, {"set first_user_prefix = messages[0]['content'] + '\\n\\n'",
                                 "(first_user_prefix if loop.first else '')"});
  if (!folds && !HasAll(sq, {"raise_exception('System role not supported')"})) {
    return NotRecognised("Gemma markers, but no known handling of the system role");
  }
  return GemmaSpec(folds, Contains(sq, "bos_token") ? std::move(bos) : "", std::move(eos));
}

Result<ChatTemplate::Spec> RecognizeLlama3(std::string_view src, std::string_view sq, std::string bos, std::string eos) {
  if (!HasAll(sq, {"'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
                   "'<|eot_id|>'",
                   "'<|start_header_id|>assistant<|end_header_id|>\\n\\n'"})) {
    return NotRecognised("Llama 3 markers, but not the Llama 3 turn structure");
  }
  if (!Contains(src, "Cutting Knowledge Date:")) {
    if (!HasAll(sq, {"{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"})) {
      return NotRecognised("Llama 3 markers, but BOS is not printed before the first turn");
    }
    return Llama3Spec("llama3", "", false, std::move(bos), std::move(eos));
  }
  // 3.1+: the system turn's preamble, from the template's own literals.
  const std::string knowledge = LineAfter(src, "Cutting Knowledge Date: ");
  std::string date = LineAfter(src, "set date_string = \"");
  if (date.empty()) date = LineAfter(src, "set date_string = '");
  if (knowledge.empty() || date.empty() ||
      !StartsWithBos(sq) ||
      !HasAll(sq, {"set system_message = messages[0]['content']|trim",
                   "'<|start_header_id|>system<|end_header_id|>\\n\\n'", "'Today Date: ' + date_string + '\\n\\n'",
                   "{{- system_message }}", "'<|start_header_id|>ipython<|end_header_id|>\\n\\n'",
                   "message['content'] | tojson"})) {
    return NotRecognised("Llama 3.1 markers, but not the Llama 3.1 system turn");
  }
  const bool builtin = Contains(sq, "builtin_tools");
  return Llama3Spec(builtin ? "llama3.1" : "llama3.2", "Cutting Knowledge Date: " + knowledge + "\nToday Date: " + date + "\n\n",
                    builtin, std::move(bos), std::move(eos));
}

Result<ChatTemplate::Spec> RecognizeChatml(std::string_view src, std::string_view sq, std::string bos, std::string eos) {
  // Qwen3-style reasoning templates print assistant turns differently; fak does not render them.
  if (!HasAll(sq, {"'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>",
                   "'<|im_start|>assistant\\n'"}) ||
      Contains(sq, "<think>")) {
    return NotRecognised("ChatML markers, but not the plain ChatML turn structure");
  }
  if (Contains(sq, "bos_token") && !StartsWithBos(sq)) {
    return NotRecognised("ChatML markers, but BOS printed other than first");
  }
  ChatTemplate::Spec s = ChatmlSpec(std::move(eos));
  if (StartsWithBos(sq)) s.bos = std::move(bos);
  s.default_system = LiteralAfter(src, "<|im_start|>system", "<|im_end|>");
  if (!s.default_system.empty()) s.variant = "chatml-default-system";
  if (Contains(sq, "<tool_response>")) {
    if (!HasAll(sq, {"{{- '<|im_start|>user' }}", "{{- '\\n<tool_response>\\n' }}", "{{- '\\n</tool_response>' }}"})) {
      return NotRecognised("ChatML with tool responses, but not Qwen2.5's wrapping");
    }
    s.tool_response = true;
    s.variant = "qwen2.5";
  }
  return s;
}

Result<ChatTemplate::Spec> RecognizeLlama2(std::string_view sq, std::string bos, std::string eos) {
  if (!HasAll(sq, {"set system_message = false",
                   "set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content']",
                   "bos_token + '[INST] ' + content.strip() + ' [/INST]'", "' '  + content.strip() + ' ' + eos_token",
                   "(message['role'] == 'user') != (loop.index0 % 2 == 0)"}) ||
      Contains(sq, "DEFAULT")) {
    return NotRecognised("Llama 2 markers, but not the Llama 2 chat structure");
  }
  return Llama2Spec(std::move(bos), std::move(eos));
}

Result<ChatTemplate::Spec> RecognizeMistral(std::string_view src, std::string_view sq, std::string bos, std::string eos) {
  // Later Mistral formats ([SYSTEM_PROMPT], tekken's "[INST]" without spaces) render differently.
  if (!HasAll(sq, {"(message['role'] == 'user') != ", "message['content'] + '[/INST]'", "eos_token", "bos_token"}) ||
      Contains(sq, "[SYSTEM_PROMPT]")) {
    return NotRecognised("[INST] markers, but not a Mistral turn structure fak knows");
  }
  ChatTemplate::Spec s = MistralSpec("mistral-legacy", std::move(bos), std::move(eos));
  std::string norm(src);  // one kind of quote, so literals can be looked up whole
  std::replace(norm.begin(), norm.end(), '"', '\'');
  s.inst_open = QuotedChoice(norm, {" [INST] ", "[INST] "});
  s.inst_close = QuotedChoice(norm, {" [/INST]", "[/INST]"});
  if (s.inst_open.empty() || s.inst_close.empty()) return NotRecognised("[INST] without known delimiters");
  if (Contains(sq, "loop.firstandsystem_messageisdefined")) {
    s.system = SystemPlacement::kFirstUser;
    s.variant = "mistral-v0.1";
  } else if (Contains(sq, "loop.lastandsystem_messageisdefined")) {
    s.system = SystemPlacement::kLastUserIfLast;
    s.variant = "mistral-v0.2";
  } else if (Contains(sq, "system_message")) {
    return NotRecognised("Mistral with a system-message placement fak does not know");
  }
  s.reply_trim = Contains(sq, "message['content']|trim+eos_token");
  if (s.reply_trim) s.variant = "mistral-v0.3";
  // v0.3 has a tool role of its own ([TOOL_RESULTS], answering a call by its id); older ones none.
  s.tool_as_user = !Contains(src, "[TOOL_RESULTS]");
  s.reply_prefix = Contains(norm, "' ' + message['content']") ? " " : "";
  return s;
}

Result<ChatTemplate::Spec> RecognizePhi3(std::string_view sq, std::string bos, std::string eos) {
  if (!HasAll(sq, {"'<|user|>\\n' + message['content'] + '<|end|>\\n'",
                   "'<|assistant|>\\n' + message['content'] + '<|end|>\\n'",
                   "'<|system|>\\n' + message['content'] + '<|end|>\\n'", "{{ '<|assistant|>\\n' }}"})) {
    return NotRecognised("Phi-3 markers, but not the Phi-3 turn structure");
  }
  if (Contains(sq, "bos_token") && !StartsWithBos(sq)) return NotRecognised("Phi-3 with BOS printed other than first");
  ChatTemplate::Spec s = Phi3Spec("phi3", std::move(eos));
  if (StartsWithBos(sq)) s.bos = std::move(bos);
  s.skip_empty_system = Contains(sq, "message['role']=='system'andmessage['content']");
  if (s.skip_empty_system) s.variant = "phi3.5";
  s.eos_without_prompt = Contains(sq, "{%else%}{{eos_token}}{%endif%}");
  return s;
}


Result<ChatTemplate::Spec> RecognizeFamily(std::string_view src, std::string bos, std::string eos) {
  const std::string sq = Squash(src);
  // The most specific markers first: Llama 2 and Mistral share [INST].
  if (Contains(src, "<<SYS>>") && Contains(src, "[INST]")) return RecognizeLlama2(sq, std::move(bos), std::move(eos));
  if (Contains(src, "[INST]")) return RecognizeMistral(src, sq, std::move(bos), std::move(eos));
  if (Contains(src, "<start_of_turn>")) return RecognizeGemma(sq, std::move(bos), std::move(eos));
  if (Contains(src, "<|start_header_id|>")) return RecognizeLlama3(src, sq, std::move(bos), std::move(eos));
  if (Contains(src, "<|im_start|>")) return RecognizeChatml(src, sq, std::move(bos), std::move(eos));
  if (Contains(src, "<|user|>") && Contains(src, "<|end|>")) return RecognizePhi3(sq, std::move(bos), std::move(eos));
  return NotRecognised("no family's markers");
}

// ---- rendering ----

// A conversation being rendered: the text so far and where each message's part begins.
struct Out {
  const ChatTemplate::Spec& spec;
  std::span<const ChatMessage> messages;
  RenderedChat r;
  std::string_view tools_json;  // the tools offered ("" for none): only fak's own family renders them by hand

  void Begin(size_t i) { r.message_offsets[i] = r.text.size(); }
  // Appends a message's own bytes (or a value made of them), recorded as content.
  void Content(std::string_view bytes) {
    if (bytes.empty()) return;
    r.content.push_back({r.text.size(), bytes.size()});
    r.text += bytes;
  }
  // The role the template sees: a tool message is a user turn where the template has no tool role.
  ChatRole Role(size_t i) const {
    ChatRole role = messages[i].role;
    return role == ChatRole::kTool && spec.tool_as_user ? ChatRole::kUser : role;
  }
  Status Refuse(size_t i, std::string_view rule) const {
    return InvalidArgument("chat template " + spec.variant + ": message " + std::to_string(i) + " (" +
                           std::string(ChatRoleName(messages[i].role)) + "): " + std::string(rule));
  }
};

constexpr std::string_view kAlternate = "roles must alternate user/assistant/user/... after the optional leading system message";

std::string_view GemmaRole(ChatRole role) { return role == ChatRole::kAssistant ? "model" : ChatRoleName(role); }

Status RenderGemma(Out& o) {
  const auto& m = o.messages;
  const bool has_system = m[0].role == ChatRole::kSystem;
  if (has_system && !o.spec.system_folds) return o.Refuse(0, "the system role is not supported (Gemma 2)");
  const size_t first = has_system ? 1 : 0;
  o.r.text += o.spec.bos;
  for (size_t i = first; i < m.size(); ++i) {
    const size_t k = i - first;
    if ((o.Role(i) == ChatRole::kUser) != (k % 2 == 0)) return o.Refuse(i, kAlternate);
    o.Begin(i);
    o.r.text += "<start_of_turn>" + std::string(GemmaRole(o.Role(i))) + "\n";
    if (k == 0 && has_system) {
      o.Content(m[0].content);
      o.r.text += "\n\n";
    }
    o.Content(Trim(m[i].content));
    o.r.text += "<end_of_turn>\n";
  }
  return Status::Ok();
}

std::string Llama3Header(std::string_view role) { return "<|start_header_id|>" + std::string(role) + "<|end_header_id|>\n\n"; }

Status RenderLlama3(Out& o) {
  const auto& m = o.messages;
  size_t first = 0;
  if (o.spec.system_preamble.empty()) {
    o.r.text += o.spec.bos;
  } else {
    // 3.1+: the system turn is always printed, with the conversation's leading system message.
    const bool has_system = m[0].role == ChatRole::kSystem;
    first = has_system ? 1 : 0;
    o.r.text += o.spec.bos + Llama3Header("system") + o.spec.system_preamble;
    if (has_system) o.Content(Trim(m[0].content));
    o.r.text += "<|eot_id|>";
  }
  for (size_t i = first; i < m.size(); ++i) {
    o.Begin(i);
    if (m[i].role == ChatRole::kTool && o.spec.tool_ipython) {
      // The template JSON-encodes "iterable" content, and a Jinja string is iterable.
      o.r.text += Llama3Header("ipython");
      o.Content(JsonString(m[i].content));
    } else {
      o.r.text += Llama3Header(ChatRoleName(m[i].role));
      o.Content(Trim(m[i].content));
    }
    o.r.text += "<|eot_id|>";
  }
  return Status::Ok();
}

Status RenderChatml(Out& o) {
  const auto& m = o.messages;
  o.r.text += o.spec.bos;
  if (!o.spec.default_system.empty() && m[0].role != ChatRole::kSystem) {
    o.r.text += "<|im_start|>system\n" + o.spec.default_system + "<|im_end|>\n";
  }
  for (size_t i = 0; i < m.size(); ++i) {
    o.Begin(i);
    if (m[i].role == ChatRole::kTool && o.spec.tool_response) {
      // Qwen2.5: consecutive tool results share one user turn.
      if (i == 0 || m[i - 1].role != ChatRole::kTool) o.r.text += "<|im_start|>user";
      o.r.text += "\n<tool_response>\n";
      o.Content(m[i].content);
      o.r.text += "\n</tool_response>";
      if (i + 1 == m.size() || m[i + 1].role != ChatRole::kTool) o.r.text += "<|im_end|>\n";
    } else {
      o.r.text += "<|im_start|>" + std::string(ChatRoleName(m[i].role)) + "\n";
      o.Content(m[i].content);
      o.r.text += "<|im_end|>\n";
    }
  }
  return Status::Ok();
}

Status RenderMistral(Out& o) {
  const auto& m = o.messages;
  const bool has_system = o.spec.system != SystemPlacement::kNone && m[0].role == ChatRole::kSystem;
  const size_t first = has_system ? 1 : 0;
  // Tool results (a template with a tool role: v0.3) stand outside the alternation.
  size_t turn = 0;
  for (size_t i = first; i < m.size(); ++i) {
    if (o.Role(i) == ChatRole::kTool) continue;
    if ((o.Role(i) == ChatRole::kUser) != (turn++ % 2 == 0)) return o.Refuse(i, kAlternate);
    if (o.Role(i) == ChatRole::kSystem) return o.Refuse(i, "only user and assistant roles follow the optional leading system message");
  }
  o.r.text += o.spec.bos;
  for (size_t i = first; i < m.size(); ++i) {
    o.Begin(i);
    if (o.Role(i) == ChatRole::kTool) {
      // A result with its call's id renders through the template's [TOOL_RESULTS] (Render sends it
      // to the interpreter); the template refuses one without.
      return o.Refuse(i, "a tool result needs the tool_call_id of the call it answers (9 letters or digits)");
    }
    if (o.Role(i) == ChatRole::kUser) {
      const bool with_system = has_system && (o.spec.system == SystemPlacement::kFirstUser ? i == first : i + 1 == m.size());
      o.r.text += o.spec.inst_open;
      if (with_system) {
        o.Content(m[0].content);
        o.r.text += "\n\n";
      }
      o.Content(m[i].content);
      o.r.text += o.spec.inst_close;
    } else {
      o.r.text += o.spec.reply_prefix;
      o.Content(o.spec.reply_trim ? Trim(m[i].content) : m[i].content);
      o.r.text += o.spec.eos;
    }
  }
  return Status::Ok();
}

Status RenderLlama2(Out& o) {
  const auto& m = o.messages;
  const bool has_system = m[0].role == ChatRole::kSystem;
  const size_t first = has_system ? 1 : 0;
  for (size_t i = first; i < m.size(); ++i) {
    const size_t k = i - first;
    if ((o.Role(i) == ChatRole::kUser) != (k % 2 == 0)) return o.Refuse(i, kAlternate);
    o.Begin(i);
    if (o.Role(i) == ChatRole::kUser) {
      o.r.text += o.spec.bos + "[INST] ";
      if (k == 0 && has_system) {
        // The template trims "<<SYS>>…<</SYS>>\n\n" + content as one string: only the user
        // content's end can lose whitespace, unless it is all whitespace.
        const std::string user = Trim("x" + m[i].content).substr(1);
        o.r.text += "<<SYS>>\n";
        o.Content(m[0].content);
        o.r.text += user.empty() ? std::string("\n<</SYS>>") : std::string("\n<</SYS>>\n\n");
        o.Content(user);
      } else {
        o.Content(Trim(m[i].content));
      }
      o.r.text += " [/INST]";
    } else if (o.Role(i) == ChatRole::kAssistant) {
      o.r.text += " ";
      o.Content(Trim(m[i].content));
      o.r.text += " " + o.spec.eos;
    }  // a later system message: the template prints nothing for it
  }
  return Status::Ok();
}

Status RenderPhi3(Out& o) {
  const auto& m = o.messages;
  o.r.text += o.spec.bos;
  for (size_t i = 0; i < m.size(); ++i) {
    o.Begin(i);
    if (o.Role(i) == ChatRole::kSystem && o.spec.skip_empty_system && m[i].content.empty()) continue;
    o.r.text += "<|" + std::string(ChatRoleName(o.Role(i))) + "|>\n";
    o.Content(m[i].content);
    o.r.text += "<|end|>\n";
  }
  return Status::Ok();
}

// fak's own markers. Tools, offered, are a `<|tools|>` turn before the first message, and an
// assistant's calls follow its text as Hermes-style `<tool_call>{"name": ..., "arguments": ...}</tool_call>`
// (the format src/grammar/tool_calls.h reads back).
Status RenderFak(Out& o) {
  if (!o.tools_json.empty()) {
    o.r.text += "<|tools|>\n";
    o.Content(o.tools_json);
    o.r.text += "\n";
  }
  for (size_t i = 0; i < o.messages.size(); ++i) {
    o.Begin(i);
    const ChatMessage& m = o.messages[i];
    o.r.text += "<|" + std::string(m.role == ChatRole::kTool ? "tool_result" : ChatRoleName(m.role)) + "|>\n";
    o.Content(m.content);
    for (const ChatToolCall& call : m.tool_calls) {
      o.r.text += "<tool_call>";
      o.Content("{\"name\": " + internal::DumpJson(internal::Json(call.name)) + ", \"arguments\": " + call.arguments + "}");
      o.r.text += "</tool_call>";
    }
    o.r.text += "\n";
  }
  return Status::Ok();
}

// The text that opens the assistant's turn ("" for the [INST] families, whose turn opens at [/INST]).
std::string_view GenerationPrompt(const ChatTemplate::Spec& s) {
  switch (s.family) {
    case ChatFamily::kGemma: return "<start_of_turn>model\n";
    case ChatFamily::kLlama3: return "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case ChatFamily::kChatml: return "<|im_start|>assistant\n";
    case ChatFamily::kPhi3:
    case ChatFamily::kFak: return "<|assistant|>\n";
    case ChatFamily::kMistral:
    case ChatFamily::kLlama2:
    case ChatFamily::kJinja: return "";
  }
  return "";
}

std::string_view FamilyName(ChatFamily f) {
  switch (f) {
    case ChatFamily::kGemma: return "gemma";
    case ChatFamily::kLlama3: return "llama3";
    case ChatFamily::kChatml: return "chatml";
    case ChatFamily::kMistral: return "mistral";
    case ChatFamily::kLlama2: return "llama2";
    case ChatFamily::kPhi3: return "phi3";
    case ChatFamily::kFak: return "fak";
    case ChatFamily::kJinja: return "jinja";
  }
  return "";
}

// ---- through the interpreter ----

// An assistant message's calls as transformers passes them: {id, type, function: {name,
// arguments}}, the arguments a mapping where their JSON text is one (templates `tojson` them),
// else the text. All of it the client's, so content.
jinja::Value ToolCallsValue(const std::vector<ChatToolCall>& calls) {
  std::vector<jinja::Value> list;
  for (const ChatToolCall& c : calls) {
    Result<jinja::Value> parsed = jinja::ParseJsonValue(c.arguments, /*content=*/true, "tool call arguments");
    jinja::Value arguments = parsed.has_value() && parsed->is_dict() ? std::move(*parsed) : jinja::Value(jinja::Text::Content(c.arguments));
    jinja::Value function = jinja::Value::MakeDict({{"name", jinja::Value(jinja::Text::Content(c.name))}, {"arguments", std::move(arguments)}});
    list.push_back(jinja::Value::MakeDict({{"id", jinja::Value(jinja::Text::Content(c.id))},
                                           {"type", jinja::Value("function")},
                                           {"function", std::move(function)}}));
  }
  return jinja::Value::MakeList(std::move(list));
}

// The variables transformers' apply_chat_template renders with. A message's role is markup, its
// content the conversation's; tool definitions are the client's, so content too.
jinja::Value TemplateContext(const ChatTemplate::Spec& s, std::span<const ChatMessage> messages, const jinja::Value& tools,
                             std::string_view tools_json, bool add_generation_prompt) {
  std::vector<jinja::Value> list;
  // Phi-4-mini's template takes the tools as the system message's `tools` (JSON text), not as
  // `tools`: given to the first system message, or to an empty one put first.
  const bool tools_in_system = !tools_json.empty() && Contains(s.jinja_text, "message['tools']");
  bool tools_given = false;
  if (tools_in_system && (messages.empty() || messages[0].role != ChatRole::kSystem)) {
    list.push_back(jinja::Value::MakeDict({{"role", jinja::Value("system")},
                                           {"content", jinja::Value("")},
                                           {"tools", jinja::Value(jinja::Text::Content(std::string(tools_json)))}}));
    tools_given = true;
  }
  for (const ChatMessage& m : messages) {
    const ChatRole role = m.role == ChatRole::kTool && s.tool_as_user ? ChatRole::kUser : m.role;
    std::vector<std::pair<std::string, jinja::Value>> fields = {{"role", jinja::Value(std::string(ChatRoleName(role)))},
                                                                 {"content", jinja::Value(jinja::Text::Content(m.content))}};
    if (!m.tool_calls.empty()) fields.emplace_back("tool_calls", ToolCallsValue(m.tool_calls));
    if (!m.tool_call_id.empty()) fields.emplace_back("tool_call_id", jinja::Value(jinja::Text::Content(m.tool_call_id)));
    if (!m.name.empty()) fields.emplace_back("name", jinja::Value(jinja::Text::Content(m.name)));
    if (tools_in_system && !tools_given && role == ChatRole::kSystem) {
      fields.emplace_back("tools", jinja::Value(jinja::Text::Content(std::string(tools_json))));
      tools_given = true;
    }
    list.push_back(jinja::Value::MakeDict(std::move(fields)));
  }
  std::vector<std::pair<std::string, jinja::Value>> vars = {
      {"messages", jinja::Value::MakeList(std::move(list))},
      {"tools", tools},
      {"documents", jinja::Value(jinja::None{})},
      {"add_generation_prompt", jinja::Value(add_generation_prompt)},
  };
  // A token the model does not have is not defined, as transformers leaves it.
  if (!s.bos.empty()) vars.emplace_back("bos_token", jinja::Value(s.bos));
  if (!s.eos.empty()) vars.emplace_back("eos_token", jinja::Value(s.eos));
  return jinja::Value::MakeDict(std::move(vars));
}

// The instant strftime_now() formats when the caller gives none: 26 Jul 2024 00:00 UTC, the date
// Llama 3.x's templates print when strftime_now is undefined — so templates that need it render
// (Granite, gpt-oss), renderings do not change from day to day, and Llama 3.2's text is the same
// whether strftime_now is defined or not.
constexpr int64_t kDefaultNow = 1721952000;

Result<jinja::Text> InterpretText(const ChatTemplate::Spec& s, std::span<const ChatMessage> messages,
                                  const jinja::Value& tools, std::string_view tools_json, bool add_generation_prompt,
                                  std::optional<int64_t> now) {
  jinja::RenderOptions options;
  options.now = now.value_or(kDefaultNow);
  Result<jinja::Text> r = s.jinja->Render(TemplateContext(s, messages, tools, tools_json, add_generation_prompt), options);
  if (!r.has_value()) return r.error().WithContext("chat template " + s.variant);
  return r;
}

size_t CommonPrefix(std::string_view a, std::string_view b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(std::min(a.size(), b.size())), b.begin()).first -
                             a.begin());
}

// Where two renderings part, moved back to the start of a markup tag it would cut: the shorter
// one may go on with text that shares the tag's first bytes ("<|endoftext|>" and "<|user|>" part
// after "<|"), and a cut inside a special token's text would split the token.
size_t PartingPoint(std::string_view full, std::string_view other, const std::vector<TextSpan>& content) {
  const size_t p = CommonPrefix(full, other);
  constexpr size_t kLongestTag = 64;
  for (size_t q = p; q-- > 0 && p - q <= kLongestTag;) {
    const char c = full[q];
    if (c == '>' || c == ']' || c == '\n') break;
    if (c != '<' && c != '[') continue;
    const bool in_content = std::any_of(content.begin(), content.end(), [&](const TextSpan& s) {
      return s.offset < p && q < s.offset + s.size;
    });
    return in_content ? p : q;
  }
  return p;
}

// Renders through the interpreter. Where each message's part begins is found by rendering the
// conversation's prefixes: message i's part begins where the rendering of messages [0, i) and
// the whole one part (PartingPoint) — its first byte that depends on message i or later (a
// template may print a message by its neighbours, or reformat earlier turns as the conversation
// grows). Offsets are then made monotone by moving earlier ones back, and moved out of any
// content range they would cut. n + 2 renderings for n messages.
Result<RenderedChat> RenderInterpreted(const ChatTemplate::Spec& s, std::span<const ChatMessage> messages,
                                       const ChatRenderOptions& options) {
  jinja::Value tools = jinja::None{};
  if (!options.tools_json.empty()) {
    FAK_ASSIGN_OR_RETURN(tools, jinja::ParseJsonValue(options.tools_json, /*content=*/true, "chat template tools"));
    if (!tools.is_list()) return InvalidArgument("chat template tools: a JSON array of tool definitions is expected");
  }
  FAK_ASSIGN_OR_RETURN(jinja::Text full, InterpretText(s, messages, tools, options.tools_json, options.add_generation_prompt, options.now));
  RenderedChat r;
  r.text = std::move(full.bytes);
  r.content = std::move(full.content);
  r.generation_offset = r.text.size();
  if (options.add_generation_prompt) {
    Result<jinja::Text> bare = InterpretText(s, messages, tools, options.tools_json, false, options.now);
    if (bare.has_value()) r.generation_offset = PartingPoint(r.text, bare->bytes, r.content);
  }
  r.message_offsets.assign(messages.size(), 0);
  for (size_t i = 0; i < messages.size(); ++i) {
    Result<jinja::Text> prefix = InterpretText(s, messages.subspan(0, i), tools, options.tools_json, false, options.now);
    // A prefix the template refuses shows nothing: message i then begins where message i-1 does.
    r.message_offsets[i] = prefix.has_value() ? PartingPoint(r.text, prefix->bytes, r.content) : (i > 0 ? r.message_offsets[i - 1] : 0);
  }
  auto outside_content = [&](size_t at) {
    for (const TextSpan& span : r.content) {
      if (span.offset < at && at < span.offset + span.size) at = span.offset;
    }
    return at;
  };
  r.generation_offset = outside_content(r.generation_offset);
  size_t bound = r.generation_offset;
  for (size_t i = messages.size(); i-- > 0;) r.message_offsets[i] = bound = outside_content(std::min(r.message_offsets[i], bound));
  return r;
}

// Whether a longer conversation keeps the shorter one's rendering (minus its generation prompt)
// as a prefix, on probe conversations with and without a system message; false when the template
// refuses them.
bool ProbePrefixStable(const ChatTemplate::Spec& s) {
  const std::vector<std::vector<ChatMessage>> bases = {
      {{ChatRole::kUser, "Hi"}},
      {{ChatRole::kSystem, "Be brief."}, {ChatRole::kUser, "Hi"}},
  };
  for (const std::vector<ChatMessage>& base : bases) {
    std::vector<ChatMessage> longer = base;
    longer.push_back({ChatRole::kAssistant, "Hello! How can I help?"});
    longer.push_back({ChatRole::kUser, "Tell me a joke."});
    Result<jinja::Text> a = InterpretText(s, base, jinja::None{}, "", true, std::nullopt);
    Result<jinja::Text> a_bare = InterpretText(s, base, jinja::None{}, "", false, std::nullopt);
    Result<jinja::Text> b = InterpretText(s, longer, jinja::None{}, "", true, std::nullopt);
    if (!a.has_value() || !a_bare.has_value() || !b.has_value()) return false;
    const size_t kept = CommonPrefix(a->bytes, a_bare->bytes);
    if (!b->bytes.starts_with(std::string_view(a->bytes).substr(0, kept))) return false;
  }
  return true;
}

// The turn-end markers an interpreted template prints, among those of the common formats.
// gpt-oss ends a reply at <|return|> or a tool call at <|call|>; its <|end|> ends only a
// message inside the turn (the analysis channel), so generation must run past it.
std::vector<std::string> TurnEnds(std::string_view src) {
  if (Contains(src, "<|return|>")) return {"<|return|>", "<|call|>"};
  std::vector<std::string> out;
  for (std::string_view m : {"<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<|END_OF_TURN_TOKEN|>",
                             "<｜end▁of▁sentence｜>", "<|end_of_text|>",
                             "<|endoftext|>"}) {
    if (Contains(src, m)) out.emplace_back(m);
  }
  return out;
}

// A template: parsed, and recognised as a family when it is one (the family's renderer then
// serves renderings without tools or dates); otherwise rendered by the interpreter.
Result<ChatTemplate::Spec> RecognizeSpec(std::string_view src, std::string bos, std::string eos) {
  Result<jinja::Template> parsed = jinja::Template::Parse(src);
  if (!parsed.has_value()) return parsed.error().WithContext("chat template \"" + Excerpt(src) + "\"");
  auto tmpl = std::make_shared<const jinja::Template>(std::move(*parsed));
  Result<ChatTemplate::Spec> family = RecognizeFamily(src, bos, eos);
  if (family.has_value()) {
    family->jinja = std::move(tmpl);
    family->jinja_text = std::string(src);
    return family;
  }
  ChatTemplate::Spec s = Base(ChatFamily::kJinja, "jinja", std::move(bos), std::move(eos));
  s.jinja = std::move(tmpl);
  s.jinja_text = std::string(src);
  s.end_of_turn = TurnEnds(src);
  s.probed_prefix_stable = ProbePrefixStable(s);
  return s;
}

Result<ChatTemplate::Spec> SpecForFamily(std::string_view name, std::string bos, std::string eos) {
  if (name == "gemma" || name == "gemma3") return GemmaSpec(true, std::move(bos), std::move(eos));
  if (name == "gemma2") return GemmaSpec(false, std::move(bos), std::move(eos));
  if (name == "llama3") return Llama3Spec("llama3", "", false, std::move(bos), std::move(eos));
  if (name == "llama3.1") return Llama3Spec("llama3.1", std::string(kLlama3Preamble), true, std::move(bos), std::move(eos));
  if (name == "llama3.2") return Llama3Spec("llama3.2", std::string(kLlama3Preamble), false, std::move(bos), std::move(eos));
  if (name == "chatml") return ChatmlSpec(std::move(eos));
  if (name == "mistral") {
    // Mistral 7B v0.1's current form: the system message prefixes the first user turn.
    ChatTemplate::Spec s = MistralSpec("mistral-v0.1", std::move(bos), std::move(eos));
    s.inst_open = " [INST] ";
    s.inst_close = " [/INST]";
    s.reply_prefix = " ";
    s.system = SystemPlacement::kFirstUser;
    return s;
  }
  if (name == "llama2") return Llama2Spec(std::move(bos), std::move(eos));
  if (name == "phi3") {
    ChatTemplate::Spec s = Phi3Spec("phi3", std::move(eos));
    s.eos_without_prompt = true;
    return s;
  }
  if (name == "fak") return Base(ChatFamily::kFak, "fak", "", "");
  return InvalidArgument("chat template family '" + std::string(name) + "' is unknown (families: " +
                         std::string(kFamilies) + ", fak; variants: gemma2, gemma3, llama3.1, llama3.2)");
}

std::string BosText(const Tokenizer& t) { return t.bos_id() >= 0 ? t.TokenText(t.bos_id()) : std::string(); }
std::string EosText(const Tokenizer& t) { return t.eos_id() >= 0 ? t.TokenText(t.eos_id()) : std::string(); }

// ---- model files ----

bool IsDirectory(const std::string& path) {
  Result<FileInfo> info = Env::Default()->GetTargetInfo(path);
  return info.has_value() && info->is_dir;
}

// The family a model's architecture implies when its file carries no template ("" for none).
std::string FamilyForArchitecture(std::string_view arch, const Tokenizer& tokenizer) {
  if (arch.starts_with("gemma")) return "gemma3";
  if (arch == "qwen2") return "chatml";
  if (arch == "phi3") return "phi3";
  if (arch == "llama" && tokenizer.FindToken("<|eot_id|>") >= 0) {
    // <|eom_id|> is a Llama 3.1+ vocabulary's; those models were trained with the dated system turn.
    return tokenizer.FindToken("<|eom_id|>") >= 0 ? "llama3.2" : "llama3";
  }
  return {};
}

Result<ChatTemplate::Spec> InferredSpec(const std::string& path, std::string_view key, std::string_view arch,
                                        const Tokenizer& tokenizer) {
  const std::string family = FamilyForArchitecture(arch, tokenizer);
  if (family.empty()) {
    return NotFound(path + ": carries no chat template, and its " + std::string(key) + " '" + std::string(arch) +
                    "' implies none fak knows; give a template (ChatTemplate::Recognize) or a family "
                    "(ChatTemplate::ForFamily)");
  }
  FAK_ASSIGN_OR_RETURN(ChatTemplate::Spec spec, SpecForFamily(family, BosText(tokenizer), EosText(tokenizer)));
  spec.source = std::string(key) + "=" + std::string(arch);
  return spec;
}

Result<ChatTemplate::Spec> GgufSpec(const std::string& path, const Tokenizer& tokenizer) {
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  if (file->Find("tokenizer.chat_template") != nullptr) {
    FAK_ASSIGN_OR_RETURN(std::string_view source, file->GetString("tokenizer.chat_template"));
    auto spec = RecognizeSpec(source, BosText(tokenizer), EosText(tokenizer));
    if (!spec) return spec.error().WithContext(path + ": tokenizer.chat_template");
    spec->source = "tokenizer.chat_template";
    return spec;
  }
  std::string_view arch;
  if (file->Find("general.architecture") != nullptr) {
    FAK_ASSIGN_OR_RETURN(arch, file->GetString("general.architecture"));
  }
  return InferredSpec(path, "general.architecture", arch, tokenizer);
}

// tokenizer_config.json's chat_template: a string, or a list of {name, template} (take "default").
Result<std::string> ConfigTemplate(const internal::Json& cfg, const std::string& what) {
  const internal::Json& t = cfg["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    std::string names;
    for (const internal::Json& e : t) {
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) continue;
      if (e["name"] == "default" && e.contains("template") && e["template"].is_string()) return e["template"].get<std::string>();
      names += (names.empty() ? "" : ", ") + e["name"].get<std::string>();
    }
    return NotFound(what + ": chat_template lists no template named 'default' (names: " + names + ")");
  }
  return InvalidArgument(what + ": chat_template is " + std::string(internal::JsonTypeName(t)) + ", not a string or a list");
}

Result<ChatTemplate::Spec> HfSpec(const std::string& path, const Tokenizer& tokenizer) {
  std::string dir = path;
  if (!IsDirectory(path)) {
    size_t slash = path.find_last_of('/');
    dir = slash == std::string::npos ? "." : path.substr(0, slash);
  }
  Env* env = Env::Default();
  const std::string config_path = dir + "/tokenizer_config.json";
  // An optional file that is there but past the JSON limit is an error, not an absent file.
  Result<std::string> config_text = internal::ReadJsonFile(env, config_path);
  if (!config_text.has_value() && config_text.error().code() == StatusCode::kResourceExhausted) return config_text.error();
  if (auto& text = config_text; text.has_value()) {
    FAK_ASSIGN_OR_RETURN(internal::Json cfg, internal::ParseJsonObject(*text, config_path));
    if (cfg.contains("chat_template") && !cfg["chat_template"].is_null()) {
      FAK_ASSIGN_OR_RETURN(std::string source, ConfigTemplate(cfg, config_path));
      auto spec = RecognizeSpec(source, BosText(tokenizer), EosText(tokenizer));
      if (!spec) return spec.error().WithContext(config_path);
      spec->source = "tokenizer_config.json chat_template";
      return spec;
    }
  }
  if (auto text = env->ReadInputFile(dir + "/chat_template.jinja", SIZE_MAX); text.has_value()) {
    auto spec = RecognizeSpec(*text, BosText(tokenizer), EosText(tokenizer));
    if (!spec) return spec.error().WithContext(dir + "/chat_template.jinja");
    spec->source = "chat_template.jinja";
    return spec;
  }
  std::string model_type;
  Result<std::string> model_config = internal::ReadJsonFile(env, dir + "/config.json");
  if (!model_config.has_value() && model_config.error().code() == StatusCode::kResourceExhausted) return model_config.error();
  if (auto& text = model_config; text.has_value()) {
    FAK_ASSIGN_OR_RETURN(internal::Json cfg, internal::ParseJsonObject(*text, dir + "/config.json"));
    if (cfg.contains("model_type") && cfg["model_type"].is_string()) model_type = cfg["model_type"].get<std::string>();
  }
  return InferredSpec(dir, "config.json model_type", model_type, tokenizer);
}

}  // namespace

std::string_view ChatRoleName(ChatRole role) {
  switch (role) {
    case ChatRole::kSystem: return "system";
    case ChatRole::kUser: return "user";
    case ChatRole::kAssistant: return "assistant";
    case ChatRole::kTool: return "tool";
  }
  return "unknown";
}

Result<ChatRole> ParseChatRole(std::string_view name) {
  for (ChatRole role : {ChatRole::kSystem, ChatRole::kUser, ChatRole::kAssistant, ChatRole::kTool}) {
    if (ChatRoleName(role) == name) return role;
  }
  return InvalidArgument("chat role '" + std::string(name) + "' is unknown (roles: system, user, assistant, tool)");
}

std::vector<std::string> RenderedChat::Pieces() const {
  std::vector<std::string> pieces;
  for (size_t i = 0; i < message_offsets.size(); ++i) {
    const size_t begin = i == 0 ? 0 : message_offsets[i];
    const size_t end = i + 1 < message_offsets.size() ? message_offsets[i + 1] : generation_offset;
    pieces.push_back(text.substr(begin, end - begin));
  }
  pieces.push_back(text.substr(generation_offset));
  return pieces;
}

ChatTemplate::ChatTemplate(std::unique_ptr<Spec> spec) : spec_(std::move(spec)) {}
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::ChatTemplate(const ChatTemplate& other) : spec_(std::make_unique<Spec>(*other.spec_)) {}
ChatTemplate& ChatTemplate::operator=(const ChatTemplate& other) {
  if (this != &other) spec_ = std::make_unique<Spec>(*other.spec_);
  return *this;
}

Result<ChatTemplate> ChatTemplate::Recognize(std::string_view jinja_source, const Tokenizer& tokenizer) {
  return Recognize(jinja_source, BosText(tokenizer), EosText(tokenizer));
}

Result<ChatTemplate> ChatTemplate::Recognize(std::string_view jinja_source, std::string_view bos_text,
                                             std::string_view eos_text) {
  FAK_ASSIGN_OR_RETURN(Spec spec, RecognizeSpec(jinja_source, std::string(bos_text), std::string(eos_text)));
  spec.source = "template source";
  return ChatTemplate(std::make_unique<Spec>(std::move(spec)));
}

Result<ChatTemplate> ChatTemplate::ForFamily(std::string_view family, const Tokenizer& tokenizer) {
  FAK_ASSIGN_OR_RETURN(Spec spec, SpecForFamily(family, BosText(tokenizer), EosText(tokenizer)));
  spec.source = "family " + std::string(family);
  return ChatTemplate(std::make_unique<Spec>(std::move(spec)));
}

Result<ChatTemplate> ChatTemplate::ForModel(const std::string& model_path, const Tokenizer& tokenizer) {
  bool gguf = false;
  if (!IsDirectory(model_path)) {
    Result<std::string> magic = Env::Default()->ReadInputFile(model_path, 4);
    gguf = magic.has_value() && *magic == "GGUF";
  }
  FAK_ASSIGN_OR_RETURN(Spec spec, gguf ? GgufSpec(model_path, tokenizer) : HfSpec(model_path, tokenizer));
  return ChatTemplate(std::make_unique<Spec>(std::move(spec)));
}

std::string_view ChatTemplate::family() const { return FamilyName(spec_->family); }
std::string_view ChatTemplate::variant() const { return spec_->variant; }
std::string_view ChatTemplate::source() const { return spec_->source; }
std::string_view ChatTemplate::jinja_source() const { return spec_->jinja_text; }
std::span<const std::string> ChatTemplate::end_of_turn() const { return spec_->end_of_turn; }

// Of the families, only a template that moves the system message into the last user turn
// rewrites earlier text.
bool ChatTemplate::prefix_stable() const {
  return spec_->family == ChatFamily::kJinja ? spec_->probed_prefix_stable : spec_->system != SystemPlacement::kLastUserIfLast;
}

Result<RenderedChat> ChatTemplate::Render(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  ChatRenderOptions options;
  options.add_generation_prompt = add_generation_prompt;
  return Render(messages, options);
}

Result<RenderedChat> ChatTemplate::Render(std::span<const ChatMessage> messages, const ChatRenderOptions& options) const {
  const Spec& s = *spec_;
  if (messages.empty()) return InvalidArgument("chat template " + s.variant + ": no messages to render");
  const bool tool_fields = std::any_of(messages.begin(), messages.end(), [](const ChatMessage& m) {
    return !m.tool_calls.empty() || !m.tool_call_id.empty() || !m.name.empty();
  });
  // fak's own family renders tools and calls by hand (RenderFak); the others need their template's text.
  const bool needs_template = !options.tools_json.empty() || tool_fields;
  if (s.family == ChatFamily::kJinja || options.now.has_value() || (needs_template && s.family != ChatFamily::kFak)) {
    if (s.jinja == nullptr) {
      return Unsupported("chat template " + s.variant + " (" + s.source +
                         ") has no template text to render tools or a date with; give the model's own template");
    }
    return RenderInterpreted(s, messages, options);
  }
  const bool add_generation_prompt = options.add_generation_prompt;
  Out o{s, messages, {}, options.tools_json};
  o.r.message_offsets.assign(messages.size(), 0);
  Status st = Status::Ok();
  switch (s.family) {
    case ChatFamily::kGemma: st = RenderGemma(o); break;
    case ChatFamily::kLlama3: st = RenderLlama3(o); break;
    case ChatFamily::kChatml: st = RenderChatml(o); break;
    case ChatFamily::kMistral: st = RenderMistral(o); break;
    case ChatFamily::kLlama2: st = RenderLlama2(o); break;
    case ChatFamily::kPhi3: st = RenderPhi3(o); break;
    case ChatFamily::kFak: st = RenderFak(o); break;
    case ChatFamily::kJinja: break;  // rendered above
  }
  FAK_RETURN_IF_ERROR(st);
  if (!add_generation_prompt && s.eos_without_prompt) o.r.text += s.eos;
  o.r.generation_offset = o.r.text.size();
  if (add_generation_prompt) o.r.text += GenerationPrompt(s);
  return std::move(o.r);
}

Result<RenderedChat> internal::RenderWithInterpreter(const ChatTemplate& chat_template, std::span<const ChatMessage> messages,
                                                     const ChatRenderOptions& options) {
  const ChatTemplate::Spec& s = *chat_template.spec_;
  if (s.jinja == nullptr) return Unsupported("chat template " + s.variant + " has no template text");
  if (messages.empty()) return InvalidArgument("chat template " + s.variant + ": no messages to render");
  return RenderInterpreted(s, messages, options);
}

Result<std::vector<int32_t>> EncodeRendered(const Tokenizer& tokenizer, const RenderedChat& rendered) {
  return tokenizer.EncodeWithPlain(rendered.text, rendered.content);
}

Result<std::vector<std::vector<int32_t>>> EncodePieces(const Tokenizer& tokenizer, const RenderedChat& rendered) {
  std::vector<std::vector<int32_t>> out;
  const std::vector<std::string> pieces = rendered.Pieces();
  size_t begin = 0;
  auto span = rendered.content.begin();
  for (const std::string& piece : pieces) {
    const size_t end = begin + piece.size();
    std::vector<TextSpan> plain;  // the content inside this piece, relative to it
    for (; span != rendered.content.end() && span->offset < end; ++span) {
      // Pieces begin at a message's first byte, so no content range crosses a piece border.
      plain.push_back({span->offset - begin, span->size});
    }
    FAK_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer.EncodeWithPlain(piece, plain));
    out.push_back(std::move(ids));
    begin = end;
  }
  return out;
}

std::vector<int32_t> EndOfGenerationTokens(const Tokenizer& tokenizer, const ChatTemplate* chat_template) {
  std::vector<int32_t> ids;
  if (tokenizer.eos_id() >= 0) ids.push_back(tokenizer.eos_id());
  if (chat_template != nullptr) {
    for (const std::string& text : chat_template->end_of_turn()) {
      if (int32_t id = tokenizer.FindToken(text); id >= 0) ids.push_back(id);
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace fak
