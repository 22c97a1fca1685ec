// Tokenizers from a Hugging Face tokenizer.json (+ tokenizer_config.json): the file's vocabulary,
// merges and added tokens mapped onto the same Vocab and tokenizer classes the GGUF path builds.
// Two shapes of `model.type == "BPE"` are accepted (docs/tokenizers.md, "tokenizer.json"):
// - byte-level BPE (GPT-2 style): a ByteLevel pre-tokenizer, alone or after a Split/Digits step
//   whose regex is one fak's pre-tokenizers implement → kind "bpe";
// - SentencePiece-style BPE (Llama, Gemma): byte_fallback, spaces replaced by ▁ (Replace
//   normalizer or Metaspace pre-tokenizer), optionally a ▁ prepended → kind "spm" with ranked merges.
// Anything else (Unigram/WordPiece models, other normalizers or regexes, added tokens that strip
// neighbouring spaces) is Unsupported, naming the field: a silently different tokenization would
// give wrong ids under a plausible TokenizerID.

#include <iterator>

#include "fak/tokenizer/tokenizer.h"
#include "fak/core/env.h"
#include "src/core/json.h"
#include "src/tokenizer/gguf_tokenizers.h"

namespace fak {
namespace {

using internal::PreTokenizer;
using internal::Vocab;
using json = internal::Json;

constexpr std::string_view kMeta = "\xE2\x96\x81";  // U+2581 ▁

// The GPT-2 family regexes as tokenizer.json spells them (the pre-tokenizer.h comments).
constexpr std::string_view kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Context for errors: every message names the file and the JSON field.
struct Ctx {
  std::string name;
  Status Bad(const std::string& field, const std::string& why) const {
    return Corruption(name + ": " + field + " " + why);
  }
  Status No(const std::string& field, const std::string& why) const {
    return Unsupported(name + ": " + field + " " + why);
  }
};

std::string Clip(const std::string& s) { return s.size() > 80 ? s.substr(0, 80) + "…" : s; }

bool BoolOr(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

std::string StrOr(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A list of components: a "Sequence" flattened (its items under `items_key`), one object, or none.
std::vector<const json*> Steps(const json& root, const char* field, const char* items_key) {
  std::vector<const json*> out;
  auto it = root.find(field);
  if (it == root.end() || it->is_null()) return out;
  if (StrOr(*it, "type") == "Sequence" && it->contains(items_key) && (*it)[items_key].is_array()) {
    for (const json& s : (*it)[items_key]) out.push_back(&s);
  } else {
    out.push_back(&*it);
  }
  return out;
}

// ---- vocabulary ----

Status ReadModelVocab(const Ctx& cx, const json& model, std::vector<std::pair<std::string, int64_t>>& entries) {
  auto v = model.find("vocab");
  if (v == model.end() || !v->is_object()) return cx.Bad("model.vocab", "is not an object");
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (!it->is_number_integer()) return cx.Bad("model.vocab['" + Clip(it.key()) + "']", "is not an integer id");
    entries.push_back({it.key(), it->get<int64_t>()});
  }
  if (entries.empty()) return cx.Bad("model.vocab", "is empty");
  return Status::Ok();
}

struct Added {
  int64_t id;
  std::string content;
  bool special;
};

Status ReadAddedTokens(const Ctx& cx, const json& root, std::vector<Added>& added) {
  auto a = root.find("added_tokens");
  if (a == root.end() || a->is_null()) return Status::Ok();
  if (!a->is_array()) return cx.Bad("added_tokens", "is not an array");
  for (size_t i = 0; i < a->size(); ++i) {
    const json& t = (*a)[i];
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
        !t["content"].is_string()) {
      return cx.Bad(field, "needs an integer 'id' and a string 'content'");
    }
    Added x{t["id"].get<int64_t>(), t["content"].get<std::string>(), BoolOr(t, "special", false)};
    for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
      if (BoolOr(t, flag, false))
        return cx.No(field + " ('" + Clip(x.content) + "')", std::string(flag) + " = true is not supported");
    }
    added.push_back(std::move(x));
  }
  return Status::Ok();
}

// Texts and types indexed by id. Added tokens override a model.vocab entry with the same id;
// special ones become CONTROL, the others USER_DEFINED (as llama.cpp's converter types them), so
// the shared special partition matches them whole, as HF's added vocabulary does.
Status BuildVocab(const Ctx& cx, const json& root, const json& model, bool spm, Vocab& v) {
  std::vector<std::pair<std::string, int64_t>> entries;
  FAK_RETURN_IF_ERROR(ReadModelVocab(cx, model, entries));
  std::vector<Added> added;
  FAK_RETURN_IF_ERROR(ReadAddedTokens(cx, root, added));
  int64_t max_id = -1;
  for (const auto& [text, id] : entries) max_id = std::max(max_id, id);
  for (const Added& a : added) max_id = std::max(max_id, a.id);
  const size_t n_entries = entries.size() + added.size();
  for (const auto& [text, id] : entries) {
    if (id < 0) return cx.Bad("model.vocab['" + Clip(text) + "']", "= " + std::to_string(id) + " is negative");
  }
  // Ids may leave holes (decoded as nothing), but not so many that a hostile id allocates the world.
  if (max_id >= static_cast<int64_t>(2 * n_entries + 1024)) {
    return cx.Bad("model.vocab", "has id " + std::to_string(max_id) + " for " + std::to_string(n_entries) + " entries");
  }
  const size_t n = static_cast<size_t>(max_id) + 1;
  v.texts.assign(n, std::string());
  v.scores.assign(n, 0.0f);
  v.types.assign(n, internal::kTokenUnused);
  std::vector<bool> seen(n, false);
  for (const auto& [text, id] : entries) {
    if (seen[id]) return cx.Bad("model.vocab['" + Clip(text) + "']", "repeats id " + std::to_string(id));
    seen[id] = true;
    v.texts[id] = text;
    const bool byte = spm && text.size() == 6 && text.rfind("<0x", 0) == 0 && text[5] == '>';
    v.types[id] = byte ? internal::kTokenByte : internal::kTokenNormal;
  }
  for (const Added& a : added) {
    if (a.id < 0) return cx.Bad("added_tokens ('" + Clip(a.content) + "')", "has a negative id");
    v.texts[a.id] = a.content;
    v.types[a.id] = a.special ? internal::kTokenControl : internal::kTokenUserDefined;
  }
  std::string unk = StrOr(model, "unk_token");
  for (size_t i = 0; i < n; ++i) {
    if (!v.texts[i].empty()) v.text_to_id[v.texts[i]] = static_cast<int32_t>(i);
  }
  if (!unk.empty()) {
    v.unk = v.Find(unk);
    if (v.unk < 0) return cx.Bad("model.unk_token", "'" + Clip(unk) + "' is not in the vocabulary");
    v.types[v.unk] = internal::kTokenUnknown;
  }
  return Status::Ok();
}

// model.merges: "A B" strings or [A, B] pairs (newer files); each part and the result a token.
Status ReadMerges(const Ctx& cx, const json& model, const Vocab& v, std::vector<std::string>& merges) {
  auto m = model.find("merges");
  if (m == model.end() || m->is_null()) return Status::Ok();
  if (!m->is_array()) return cx.Bad("model.merges", "is not an array");
  merges.reserve(m->size());
  for (size_t i = 0; i < m->size(); ++i) {
    const json& e = (*m)[i];
    const std::string field = "model.merges[" + std::to_string(i) + "]";
    std::string a, b;
    if (e.is_string()) {
      const std::string& s = e.get_ref<const std::string&>();
      size_t space = s.size() > 1 ? s.find(' ', 1) : std::string::npos;
      if (space == std::string::npos) return cx.Bad(field, "'" + Clip(s) + "' has no separating space");
      a = s.substr(0, space);
      b = s.substr(space + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
      // fak keys merges as "A B"; a part holding a space would be ambiguous.
      if (a.find(' ') != std::string::npos || b.find(' ') != std::string::npos)
        return cx.No(field, "has a part containing a space");
    } else {
      return cx.Bad(field, "is neither \"A B\" nor [A, B]");
    }
    if (v.Find(a) < 0 || v.Find(b) < 0 || v.Find(a + b) < 0) {
      return cx.Bad(field, "'" + Clip(a + " " + b) + "' merges tokens not in the vocabulary");
    }
    merges.push_back(a + " " + b);
  }
  return Status::Ok();
}

// ---- SentencePiece-style rules ----

// Whether `j` is Replace(" " → "▁").
bool IsSpaceToMeta(const json& j) {
  if (StrOr(j, "type") != "Replace" || StrOr(j, "content") != kMeta) return false;
  auto p = j.find("pattern");
  return p != j.end() && p->is_object() && StrOr(*p, "String") == " ";
}

// Reads the normalizer and pre-tokenizer of a SentencePiece-style file into add_space_prefix.
Status SpmRules(const Ctx& cx, const json& root, Vocab& v) {
  bool escaped = false, prefix = false;
  for (const json* n : Steps(root, "normalizer", "normalizers")) {
    const std::string type = StrOr(*n, "type");
    if (IsSpaceToMeta(*n)) {
      escaped = true;
    } else if (type == "Prepend" && StrOr(*n, "prepend") == kMeta) {
      prefix = true;
    } else {
      return cx.No("normalizer", "step '" + type + "' is not supported (supported: Replace ' ' → '▁', Prepend '▁')");
    }
  }
  for (const json* p : Steps(root, "pre_tokenizer", "pretokenizers")) {
    const std::string type = StrOr(*p, "type");
    if (type == "Metaspace" && StrOr(*p, "replacement") == kMeta && !BoolOr(*p, "split", false)) {
      // Metaspace prepends ▁ only when the text does not already start with one (and "first" only
      // at the start of the input), unlike the Prepend normalizer and SentencePiece's dummy prefix,
      // which always prepend; fak implements the latter only.
      const std::string scheme = StrOr(*p, "prepend_scheme");
      if (scheme != "never" && (!scheme.empty() || BoolOr(*p, "add_prefix_space", true))) {
        return cx.No("pre_tokenizer Metaspace prepend_scheme",
                     "'" + (scheme.empty() ? std::string("always") : scheme) +
                         "' is not supported (never; or a Prepend normalizer)");
      }
      escaped = true;
    } else if (type == "Split" && escaped && p->contains("pattern") && (*p)["pattern"].is_object() &&
               StrOr((*p)["pattern"], "String") == " ") {
      // Splitting on " " after the normalizer turned every space into ▁ never splits.
    } else {
      return cx.No("pre_tokenizer", "'" + type + "' is not supported for a byte_fallback BPE");
    }
  }
  if (!escaped) return cx.No("normalizer", "does not replace ' ' by '▁' (needed for a byte_fallback BPE)");
  v.add_space_prefix = prefix;
  return Status::Ok();
}

// ---- byte-level rules ----

Result<PreTokenizer> RegexKind(const Ctx& cx, const json& split) {
  auto p = split.find("pattern");
  std::string regex = p != split.end() && p->is_object() ? StrOr(*p, "Regex") : std::string();
  if (StrOr(split, "behavior") != "Isolated" || BoolOr(split, "invert", false)) {
    return cx.No("pre_tokenizer Split", "behavior must be Isolated and invert false");
  }
  if (regex == kGpt2Regex) return PreTokenizer::kGpt2;
  if (regex == kLlama3Regex) return PreTokenizer::kLlama3;
  if (regex == kQwen2Regex) return PreTokenizer::kQwen2;
  return cx.No("pre_tokenizer Split regex", "'" + Clip(regex) + "' is not one fak implements (GPT-2, Llama 3, Qwen2)");
}

// The pre-tokenizer a ByteLevel file describes: ByteLevel (GPT-2 regex), Split(regex) + ByteLevel
// without its regex, or Digits(individual) + ByteLevel (SmolLM).
Result<PreTokenizer> ByteLevelRules(const Ctx& cx, const json& root) {
  auto n = root.find("normalizer");
  if (n != root.end() && !n->is_null())
    return cx.No("normalizer", "'" + StrOr(*n, "type") + "' with a ByteLevel BPE is not supported");
  std::vector<const json*> steps = Steps(root, "pre_tokenizer", "pretokenizers");
  if (steps.empty() || StrOr(*steps.back(), "type") != "ByteLevel") {
    return cx.No("pre_tokenizer", "must end in ByteLevel for a BPE without byte_fallback");
  }
  const json& bl = *steps.back();
  if (BoolOr(bl, "add_prefix_space", false))
    return cx.No("pre_tokenizer ByteLevel.add_prefix_space", "= true is not supported");
  const bool own_regex = BoolOr(bl, "use_regex", true);
  if (steps.size() == 1 && own_regex) return PreTokenizer::kGpt2;
  if (steps.size() == 2 && !own_regex && StrOr(*steps[0], "type") == "Split") return RegexKind(cx, *steps[0]);
  if (steps.size() == 2 && own_regex && StrOr(*steps[0], "type") == "Digits" &&
      BoolOr(*steps[0], "individual_digits", false)) {
    return PreTokenizer::kSmolLm;
  }
  return cx.No("pre_tokenizer",
               "sequence is not one fak implements (ByteLevel; Split + ByteLevel; Digits + ByteLevel)");
}

std::string_view PreName(PreTokenizer p) {
  switch (p) {
    case PreTokenizer::kGpt2:
      return "gpt-2";
    case PreTokenizer::kLlama3:
      return "llama3";
    case PreTokenizer::kQwen2:
      return "qwen2";
    case PreTokenizer::kSmolLm:
      return "smollm";
    case PreTokenizer::kDefault:
      return "default";
  }
  return "";
}

// ---- special ids ----

// A special token field of tokenizer_config.json: a string, {"content": …}, or null.
std::string TokenText(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return StrOr(*it, "content");
  return {};
}

// The first special token of the post-processor's "single" template (the BOS it adds), or "".
std::string TemplateBos(const json& root) {
  for (const json* p : Steps(root, "post_processor", "processors")) {
    if (StrOr(*p, "type") != "TemplateProcessing") continue;
    auto single = p->find("single");
    if (single == p->end() || !single->is_array() || single->empty()) return {};
    const json& first = (*single)[0];
    if (first.is_object() && first.contains("SpecialToken") && first["SpecialToken"].is_object()) {
      return StrOr(first["SpecialToken"], "id");
    }
  }
  return {};
}

// BOS/EOS and add_bos: tokenizer_config.json when it says, else the post-processor's template.
Status SpecialIds(const Ctx& cx, const json& root, const json* cfg, Vocab& v) {
  const std::string template_bos = TemplateBos(root);
  std::string bos = cfg ? TokenText(*cfg, "bos_token") : std::string();
  std::string eos = cfg ? TokenText(*cfg, "eos_token") : std::string();
  if (bos.empty()) bos = template_bos;
  v.bos = bos.empty() ? -1 : v.Find(bos);
  v.eos = eos.empty() ? -1 : v.Find(eos);
  if (!bos.empty() && v.bos < 0) return cx.Bad("bos_token", "'" + Clip(bos) + "' is not in the vocabulary");
  if (!eos.empty() && v.eos < 0) return cx.Bad("eos_token", "'" + Clip(eos) + "' is not in the vocabulary");
  v.add_bos = cfg && cfg->contains("add_bos_token") && (*cfg)["add_bos_token"].is_boolean()
                  ? (*cfg)["add_bos_token"].get<bool>()
                  : !template_bos.empty();
  return Status::Ok();
}

Result<std::unique_ptr<Tokenizer>> Build(const Ctx& cx, const json& root, const json* cfg) {
  auto model = root.find("model");
  if (model == root.end() || !model->is_object()) return cx.Bad("model", "is missing or not an object");
  const std::string type = StrOr(*model, "type");
  if (type != "BPE") return cx.No("model.type", "'" + type + "' is not supported (supported: BPE)");
  for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model->find(key);
    if (it != model->end() && !it->is_null() && !(it->is_string() && it->get_ref<const std::string&>().empty())) {
      return cx.No(std::string("model.") + key, "is set (not supported)");
    }
  }
  const bool spm = BoolOr(*model, "byte_fallback", false);
  Vocab v;
  FAK_RETURN_IF_ERROR(BuildVocab(cx, root, *model, spm, v));
  std::vector<std::string> merges;
  FAK_RETURN_IF_ERROR(ReadMerges(cx, *model, v, merges));
  FAK_RETURN_IF_ERROR(SpecialIds(cx, root, cfg, v));
  const bool ignore_merges = BoolOr(*model, "ignore_merges", false);
  if (spm) {
    if (ignore_merges) return cx.No("model.ignore_merges", "= true with byte_fallback is not supported");
    FAK_RETURN_IF_ERROR(SpmRules(cx, root, v));
    internal::IndexSpecials(v);
    return internal::MakeSpmTokenizer(std::move(v), merges);
  }
  FAK_ASSIGN_OR_RETURN(PreTokenizer pre, ByteLevelRules(cx, root));
  // fak's byte-level BPE ignores merges (a whole-word token wins) exactly for the Llama 3 split.
  if (ignore_merges != (pre == PreTokenizer::kLlama3)) {
    return cx.No("model.ignore_merges", std::string("= ") + (ignore_merges ? "true" : "false") +
                                            " with pre-tokenizer " + std::string(PreName(pre)) + " is not supported");
  }
  internal::IndexSpecials(v);
  std::vector<std::string_view> views(merges.begin(), merges.end());
  return internal::MakeBpeTokenizer(std::move(v), views, pre, PreName(pre));
}

bool IsDir(const std::string& path) {
  Result<FileInfo> info = Env::Default()->GetTargetInfo(path);
  return info.has_value() && info->is_dir;
}

// The file's text; NotFound when it does not exist and `optional` (the caller then goes on without).
Result<std::string> ReadFile(const std::string& path) { return internal::ReadJsonFile(Env::Default(), path); }

}  // namespace

Result<std::unique_ptr<Tokenizer>> ParseHfTokenizer(std::string_view tokenizer_json, std::string_view config_json,
                                                    std::string_view name) {
  Ctx cx{std::string(name)};
  FAK_ASSIGN_OR_RETURN(json root, internal::ParseJsonObject(tokenizer_json, cx.name, StatusCode::kCorruption));
  json cfg;
  if (!config_json.empty()) {
    FAK_ASSIGN_OR_RETURN(cfg, internal::ParseJsonObject(config_json, cx.name + ": tokenizer_config.json",
                                                        StatusCode::kCorruption));
  }
  // Build reads many fields; a type error it does not check for must not escape the API.
  return internal::ContainJsonExceptions(StatusCode::kCorruption, cx.name,
                                         [&] { return Build(cx, root, config_json.empty() ? nullptr : &cfg); });
}

Result<std::unique_ptr<Tokenizer>> LoadTokenizerFromHfJson(const std::string& path) {
  std::string file = path, dir;
  if (IsDir(path)) {
    dir = path;
    file = path + "/tokenizer.json";
  } else {
    size_t slash = path.find_last_of('/');
    dir = slash == std::string::npos ? "." : path.substr(0, slash);
    if (path.size() >= 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0) file = dir + "/tokenizer.json";
  }
  FAK_ASSIGN_OR_RETURN(std::string text, ReadFile(file));
  std::string config;
  if (auto c = ReadFile(dir + "/tokenizer_config.json"); c.has_value()) {
    config = std::move(*c);
  } else if (c.error().code() == StatusCode::kResourceExhausted) {  // there, but past the JSON limit
    return c.error();
  }
  return ParseHfTokenizer(text, config, file);
}

Result<std::unique_ptr<Tokenizer>> LoadTokenizerForModel(const std::string& path) {
  if (!IsDir(path)) {
    Result<std::string> magic = Env::Default()->ReadInputFile(path, 4);
    if (magic.has_value() && *magic == "GGUF") return LoadTokenizerFromGguf(path);
  }
  return LoadTokenizerFromHfJson(path);
}

}  // namespace fak
