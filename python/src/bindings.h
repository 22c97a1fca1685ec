// Shared pieces of the fak Python extension: how a Status becomes a Python exception, the loaded
// model every other object keeps alive, and the per-part registration functions module.cc calls.
#ifndef FAK_PYTHON_BINDINGS_H_
#define FAK_PYTHON_BINDINGS_H_

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fak/fak.h"

namespace fak::python {

namespace nb = nanobind;

// Carries a failed Status out of a binding; module.cc translates it into the fak.errors class of
// its code (fak.InvalidArgumentError, ...), with the code name and message as attributes.
class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)), what_(status_.ToString()) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  Status status_;
  std::string what_;
};

inline void ThrowIfError(const Status& status) {
  if (!status.ok()) throw StatusError(status);
}
template <class T>
T ValueOrThrow(Result<T>&& result) {
  if (!result.has_value()) throw StatusError(result.error());
  return std::move(*result);
}

// Why a Python str has no UTF-8 form (a lone surrogate such as '\ud800'), naming the first such
// character and its index.
std::string UnencodableReason(nb::handle str);

// A str entering the bindings, as UTF-8. nanobind's std::string caster turns a str without a UTF-8
// form into "incompatible function arguments" (TypeError), and nb::cast into RuntimeError; every
// binding takes str parameters as Text instead, whose caster accepts any str and whose use as a
// std::string raises InvalidArgumentError saying why (fak.Error, like every other bad argument).
class Text {
 public:
  Text() = default;
  explicit Text(std::string utf8) : utf8_(std::move(utf8)) {}
  static Text Unencodable(std::string reason) {
    Text t;
    t.unencodable_ = std::move(reason);
    return t;
  }
  const std::string& str() const {
    if (!unencodable_.empty()) throw StatusError(InvalidArgument("a str argument " + unencodable_));
    return utf8_;
  }
  operator const std::string&() const { return str(); }
  operator std::string_view() const { return str(); }

 private:
  std::string utf8_;
  std::string unencodable_;  // non-empty: why the str had no UTF-8 form
};
std::vector<std::string> Strings(const std::vector<Text>& texts);
inline std::optional<std::string> Strings(const std::optional<Text>& text) {
  if (!text) return std::nullopt;
  return text->str();
}

// The UTF-8 of a str handle; InvalidArgument naming `what` when it is no str or has no UTF-8 form.
std::string Utf8Of(nb::handle str, std::string_view what);

class PyEngine;

// fak.Model: the library's loaded-model bundle (fak::LoadModel: the model, its tokenizer — null
// for the random-weight benchmark shapes — and chat template — null when it has none, with
// template_status saying why) and the engine create_chat_completion uses. Immutable after load, so
// shared by every Session and Engine made from it (each holds a shared_ptr).
struct ModelHandle : LoadedModel, std::enable_shared_from_this<ModelHandle> {
  explicit ModelHandle(LoadedModel loaded);  // out of line: PyEngine is complete there

  // FailedPrecondition naming what the model lacks when it has none.
  const Tokenizer& RequireTokenizer() const;
  const ChatTemplate& RequireTemplate() const;

  // The engine create_chat_completion uses when called on the model itself, made on first use.
  PyEngine& DefaultEngine();
  // The tokenizer's vocabulary as a trie for grammar masks: built by the first constrained request
  // (about a second at a 262k vocabulary), then shared by every engine on this model.
  Result<std::shared_ptr<const TokenVocabulary>> Vocabulary() const;
  ~ModelHandle();

 private:
  mutable std::mutex vocabulary_mu_;
  mutable std::shared_ptr<const TokenVocabulary> vocabulary_;  // GUARDED_BY(vocabulary_mu_)
  std::mutex engine_mu_;
  std::unique_ptr<PyEngine> default_engine_;  // GUARDED_BY(engine_mu_); destroyed before the model
};
using ModelRef = std::shared_ptr<ModelHandle>;

// Logits moved into a NumPy array that owns them (no copy): shape [n] or [rows][n].
nb::ndarray<nb::numpy, float> LogitsArray(std::vector<float>&& logits, size_t rows = 1);
// Token ids of a Python sequence of ints (a list, a NumPy integer array...); InvalidArgument naming
// `what` for anything else (strings, floats, ids beyond int32).
std::vector<int32_t> TokensOf(const nb::handle& tokens, const char* what);
// A conversation given as OpenAI-style dicts ({"role": ..., "content": ...}); InvalidArgument
// naming the message at fault.
std::vector<ChatMessage> ParseMessages(const nb::handle& messages);
// "system", "user", "tool_result" (or "tool"), "assistant"; InvalidArgument otherwise.
SegmentKind ParseSegmentKind(const std::string& name);
// Parses 64 hex characters or 32 raw bytes as a public key.
PublicKey ParsePublicKey(const nb::object& key);

// Statistics and verdicts as dicts (engine_bindings.cc, store_bindings.cc).
nb::dict TreeStatsDict(const RadixTreeStats& s);
nb::dict GateStatsDict(const GateStats& s);
nb::dict VerdictDict(const Verdict& v);
// "lru", "lfu", "deepest_first"; InvalidArgument otherwise.
EvictionPolicy ParsePolicy(const std::string& name);

// The signature create_chat_completion (python/fak/_chat.py) shows in the stubs.
inline constexpr const char* kChatCompletionSignature =
    "def create_chat_completion(self, messages: collections.abc.Sequence[dict[str, typing.Any]], *, "
    "stream: bool = False, max_tokens: int | None = None, temperature: float = 1.0, top_p: float = 1.0, "
    "top_k: int = 0, min_p: float = 0.0, seed: int | None = None, stop: str | list[str] | None = None, "
    "repeat_penalty: float = 1.0, presence_penalty: float = 0.0, frequency_penalty: float = 0.0, "
    "logit_bias: dict[int, float] | None = None, logprobs: bool = False, top_logprobs: int = 0, n: int = 1, "
    "response_format: dict[str, typing.Any] | None = None, grammar: str | None = None, "
    "model: str | None = None, tenant: str = 'default') -> "
    "dict[str, typing.Any] | collections.abc.Iterator[dict[str, typing.Any]]";

void BindModel(nb::module_& m);
void BindSession(nb::module_& m);
void BindEngine(nb::module_& m);
void BindStore(nb::module_& m);
void BindPlanner(nb::module_& m);
void BindRadix(nb::module_& m);

}  // namespace fak::python

namespace nanobind::detail {

template <>
struct type_caster<fak::python::Text> {
  NB_TYPE_CASTER(fak::python::Text, const_name("str"))

  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    if (!PyUnicode_Check(src.ptr())) return false;
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(src.ptr(), &size);
    if (utf8 == nullptr) {
      PyErr_Clear();
      value = fak::python::Text::Unencodable(fak::python::UnencodableReason(src));
    } else {
      value = fak::python::Text(std::string(utf8, static_cast<size_t>(size)));
    }
    return true;
  }
  static handle from_cpp(const fak::python::Text& text, rv_policy, cleanup_list*) noexcept {
    const std::string& s = text.str();
    return PyUnicode_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size()));
  }
};

}  // namespace nanobind::detail

#endif  // FAK_PYTHON_BINDINGS_H_
