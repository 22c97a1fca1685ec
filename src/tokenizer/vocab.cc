// Vocabulary loading, special-token partition and the shared decode/digest half of the GGUF
// tokenizers.
#include "src/tokenizer/vocab.h"

#include <algorithm>
#include <cstring>
#include <list>
#include <set>

namespace fak::internal {
namespace {

// An optional special id: absent keys keep `fallback`; ids outside the vocabulary become -1.
Result<int32_t> SpecialId(const GgufFile& file, std::string_view key, int32_t fallback, size_t n_vocab) {
  int64_t id = fallback;
  if (file.Find(key) != nullptr) {
    FAK_ASSIGN_OR_RETURN(id, file.GetInt64(key));
  }
  return (id >= 0 && static_cast<uint64_t>(id) < n_vocab) ? static_cast<int32_t>(id) : -1;
}

Result<bool> OptionalBool(const GgufFile& file, std::string_view key, bool fallback) {
  if (file.Find(key) == nullptr) return fallback;
  return file.GetBool(key);
}

Status LoadArrays(const GgufFile& file, Vocab& v) {
  FAK_ASSIGN_OR_RETURN(std::vector<std::string_view> texts, file.GetStringArray("tokenizer.ggml.tokens"));
  if (texts.empty() || texts.size() > static_cast<size_t>(INT32_MAX)) {
    return Corruption(file.name() + ": tokenizer.ggml.tokens has " + std::to_string(texts.size()) + " entries");
  }
  size_t n = texts.size();
  v.texts.assign(texts.begin(), texts.end());
  v.scores.assign(n, 0.0f);
  v.types.assign(n, kTokenNormal);
  if (file.Find("tokenizer.ggml.scores") != nullptr) {
    FAK_ASSIGN_OR_RETURN(v.scores, file.GetFloatArray("tokenizer.ggml.scores"));
    if (v.scores.size() != n) {
      return Corruption(file.name() + ": tokenizer.ggml.scores has " + std::to_string(v.scores.size()) +
                        " entries for " + std::to_string(n) + " tokens");
    }
  }
  if (file.Find("tokenizer.ggml.token_type") != nullptr) {
    FAK_ASSIGN_OR_RETURN(std::vector<int64_t> types, file.GetInt64Array("tokenizer.ggml.token_type"));
    if (types.size() != n) {
      return Corruption(file.name() + ": tokenizer.ggml.token_type has " + std::to_string(types.size()) +
                        " entries for " + std::to_string(n) + " tokens");
    }
    for (size_t i = 0; i < n; ++i) {
      if (types[i] < kTokenUndefined || types[i] > kTokenByte) {
        return Corruption(file.name() + ": tokenizer.ggml.token_type[" + std::to_string(i) + "] = " +
                          std::to_string(types[i]) + " is not a token type (0..6)");
      }
      v.types[i] = static_cast<int32_t>(types[i]);
    }
  }
  v.text_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!v.texts[i].empty()) v.text_to_id[v.texts[i]] = static_cast<int32_t>(i);
  }
  return Status::Ok();
}

// The specials that occur anywhere in `text`, in partition order (a cheap pre-scan so the ordered
// partition below only visits candidates that can match).
std::vector<int32_t> OccurringSpecials(const Vocab& v, std::string_view text) {
  std::vector<int32_t> found;
  for (size_t p = 0; p < text.size(); ++p) {
    if (!v.special_first_byte[static_cast<uint8_t>(text[p])]) continue;
    for (size_t len : v.special_lengths) {
      if (len > text.size() - p) break;
      int32_t id = v.Find(text.substr(p, len));
      if (id >= 0 && v.IsSpecial(id)) found.push_back(id);
    }
  }
  // The order of Vocab::specials: longest text first, then by id.
  std::sort(found.begin(), found.end(), [&](int32_t a, int32_t b) {
    size_t la = v.texts[a].size(), lb = v.texts[b].size();
    return la != lb ? la > lb : a < b;
  });
  found.erase(std::unique(found.begin(), found.end()), found.end());
  return found;
}

}  // namespace

void IndexSpecials(Vocab& v) {
  std::set<size_t> lengths;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v.IsSpecial(static_cast<int32_t>(i)) || v.texts[i].empty()) continue;
    v.specials.push_back(static_cast<int32_t>(i));
    lengths.insert(v.texts[i].size());
    v.special_first_byte[static_cast<uint8_t>(v.texts[i][0])] = true;
  }
  std::stable_sort(v.specials.begin(), v.specials.end(),
                   [&](int32_t a, int32_t b) { return v.texts[a].size() > v.texts[b].size(); });
  v.special_lengths.assign(lengths.begin(), lengths.end());
}

Result<Vocab> LoadVocab(const GgufFile& file, VocabKind kind, bool add_bos_default) {
  Vocab v;
  FAK_RETURN_IF_ERROR(LoadArrays(file, v));
  bool spm = kind == VocabKind::kSpm;
  FAK_ASSIGN_OR_RETURN(v.bos, SpecialId(file, "tokenizer.ggml.bos_token_id", spm ? 1 : -1, v.size()));
  FAK_ASSIGN_OR_RETURN(v.eos, SpecialId(file, "tokenizer.ggml.eos_token_id", spm ? 2 : -1, v.size()));
  FAK_ASSIGN_OR_RETURN(v.unk, SpecialId(file, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, v.size()));
  FAK_ASSIGN_OR_RETURN(v.add_bos, OptionalBool(file, "tokenizer.ggml.add_bos_token", add_bos_default));
  if (spm) {
    FAK_ASSIGN_OR_RETURN(v.add_space_prefix, OptionalBool(file, "tokenizer.ggml.add_space_prefix", true));
  }
  IndexSpecials(v);
  return v;
}

std::vector<Fragment> PartitionSpecials(const Vocab& vocab, std::string_view text) {
  std::list<Fragment> frags;
  if (!text.empty()) frags.push_back({text, -1});
  for (int32_t id : OccurringSpecials(vocab, text)) {
    std::string_view special = vocab.texts[id];
    for (auto it = frags.begin(); it != frags.end(); ++it) {
      if (it->token >= 0) continue;
      size_t pos = it->text.find(special);
      if (pos == std::string_view::npos) continue;
      std::string_view raw = it->text;
      it = frags.erase(it);
      size_t start = 0;
      for (; pos != std::string_view::npos; pos = raw.find(special, start)) {
        if (pos > start) frags.insert(it, {raw.substr(start, pos - start), -1});
        frags.insert(it, {special, id});
        start = pos + special.size();
      }
      if (start < raw.size()) frags.insert(it, {raw.substr(start), -1});
      --it;  // the loop's ++it moves to the fragment after the ones inserted
    }
  }
  return {frags.begin(), frags.end()};
}

VocabTokenizer::VocabTokenizer(Vocab vocab, std::string kind, std::vector<std::string> pieces, std::string_view rules)
    : vocab_(std::move(vocab)), kind_(std::move(kind)), pieces_(std::move(pieces)) {
  Digester d;
  auto str = [&](std::string_view s) { d.UpdatePod(static_cast<uint64_t>(s.size())).Update(s); };
  str("fak.tokenizer.gguf.v1");  // bump when the encoding rules change
  str(kind_);
  d.UpdatePod(static_cast<uint64_t>(vocab_.size()));
  for (size_t i = 0; i < vocab_.size(); ++i) {
    str(vocab_.texts[i]);
    d.UpdatePod(vocab_.scores[i]).UpdatePod(vocab_.types[i]);
  }
  d.UpdatePod(vocab_.bos).UpdatePod(vocab_.eos).UpdatePod(vocab_.unk);
  d.UpdatePod(static_cast<uint8_t>(vocab_.add_bos)).UpdatePod(static_cast<uint8_t>(vocab_.add_space_prefix));
  str(rules);
  digest_ = d.Finish();
}

Result<std::vector<int32_t>> VocabTokenizer::Encode(std::string_view text) const {
  return EncodeFragments(PartitionSpecials(vocab_, text));
}

Result<std::vector<int32_t>> VocabTokenizer::EncodeWithPlain(std::string_view text, std::span<const TextSpan> plain) const {
  FAK_RETURN_IF_ERROR(CheckPlainSpans(text, plain));
  std::vector<Fragment> fragments;
  // Raw text is merged across region borders: a plain range only switches the special-token
  // match off, it does not cut the text, so ordinary content tokenizes exactly as in Encode.
  auto add_raw = [&](std::string_view raw) {
    if (raw.empty()) return;
    if (!fragments.empty() && fragments.back().token < 0 &&
        fragments.back().text.data() + fragments.back().text.size() == raw.data()) {
      fragments.back().text = std::string_view(fragments.back().text.data(), fragments.back().text.size() + raw.size());
    } else {
      fragments.push_back({raw, -1});
    }
  };
  auto add_marked = [&](std::string_view region) {
    for (const Fragment& f : PartitionSpecials(vocab_, region)) {
      if (f.token >= 0) {
        fragments.push_back(f);
      } else {
        add_raw(f.text);
      }
    }
  };
  size_t at = 0;
  for (const TextSpan& span : plain) {
    add_marked(text.substr(at, span.offset - at));
    add_raw(text.substr(span.offset, span.size));
    at = span.offset + span.size;
  }
  add_marked(text.substr(at));
  return EncodeFragments(fragments);
}

std::vector<int32_t> VocabTokenizer::EncodeFragments(const std::vector<Fragment>& fragments) const {
  std::vector<int32_t> out;
  bool after_special = true;
  for (const Fragment& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else {
      EncodeRaw(f.text, after_special, out);
      after_special = false;
    }
  }
  return out;
}

Result<std::string> VocabTokenizer::Decode(std::span<const int32_t> ids) const { return DecodeFrom(ids, true); }

Result<std::string> VocabTokenizer::DecodeContinuation(std::span<const int32_t> ids) const { return DecodeFrom(ids, false); }

Result<std::string> VocabTokenizer::DecodeFrom(std::span<const int32_t> ids, bool at_start) const {
  std::string out;
  bool after_special = at_start;  // mirrors Encode: the space prefix follows the start and specials
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = ids[i];
    if (id < 0 || static_cast<size_t>(id) >= vocab_.size()) {
      return InvalidArgument(kind_ + " tokenizer: id " + std::to_string(id) + " at index " + std::to_string(i) +
                             " is outside [0, " + std::to_string(vocab_.size()) + ")");
    }
    std::string_view piece = pieces_[id];
    bool special = vocab_.IsSpecial(id);
    if (vocab_.add_space_prefix && after_special && !special && !piece.empty() && piece[0] == ' ') {
      piece.remove_prefix(1);
    }
    out.append(piece);
    after_special = special;
  }
  return out;
}

}  // namespace fak::internal
