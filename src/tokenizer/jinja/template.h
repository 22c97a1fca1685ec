// A Jinja interpreter for the subset Hugging Face chat templates use, rendering as Python jinja2
// does under transformers' settings (trim_blocks, lstrip_blocks, loop controls, the sandbox's
// immutability). Internal to the tokenizer; ChatTemplate is the public surface.
// docs/chat-templates.md lists what it supports and what it refuses.
#ifndef FAK_SRC_TOKENIZER_JINJA_TEMPLATE_H_
#define FAK_SRC_TOKENIZER_JINJA_TEMPLATE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "fak/core/status.h"
#include "src/tokenizer/jinja/value.h"

namespace fak::jinja {

struct Stmt;

// Bounds on what an untrusted template may make a render do; past one, ResourceExhausted naming it.
struct Limits {
  int max_depth = 64;                      // macro calls and nested values (tojson, printing) at once
  size_t max_output_bytes = size_t{64} << 20;  // text produced, captured {% set %} blocks included
  size_t max_iterations = size_t{1} << 20;     // loop iterations over the whole render
};

struct RenderOptions {
  Limits limits;
  // Seconds since the epoch that `strftime_now(format)` formats (UTC); absent: strftime_now is
  // undefined, as in plain jinja2.
  std::optional<int64_t> now;
};

class Template {
 public:
  // Parses `source`. InvalidArgument for a syntax error, Unsupported for a construct outside the
  // subset — both naming it and its line.
  static Result<Template> Parse(std::string_view source);

  // Renders with `context` (a dict: messages, tools, add_generation_prompt, bos_token, ...).
  // raise_exception(msg) is InvalidArgument carrying msg; a runtime error (an undefined value
  // used, a type mismatch) InvalidArgument naming the line; a limit ResourceExhausted.
  Result<Text> Render(const Value& context, const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body_;
};

}  // namespace fak::jinja

#endif  // FAK_SRC_TOKENIZER_JINJA_TEMPLATE_H_
