// TextCorpus: source blobs and self-describing token-list blobs (format in docs/store.md).
#include "fak/store/text_corpus.h"

#include <cstring>
#include <utility>

namespace fak {
namespace {

// Token blob: magic "FAKTOK1\0" (8) | SourceDigest (32) | TokenizerID (32) | count u64 LE | ids i32 LE.
constexpr char kTokenMagic[8] = {'F', 'A', 'K', 'T', 'O', 'K', '1', '\0'};
constexpr size_t kTokenHeaderBytes = 8 + 32 + 32 + 8;

std::string EncodeTokens(const Digest& source, const Digest& tokenizer_id, const std::vector<int32_t>& ids) {
  std::string out(kTokenMagic, 8);
  out.append(reinterpret_cast<const char*>(source.bytes.data()), Digest::kSize);
  out.append(reinterpret_cast<const char*>(tokenizer_id.bytes.data()), Digest::kSize);
  const uint64_t n = ids.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  for (int32_t id : ids) {
    const uint32_t u = static_cast<uint32_t>(id);
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  }
  return out;
}

}  // namespace

Digest TextCorpus::TokenKey(const Digest& source, const Digest& tokenizer_id) {
  return Digester().Update("fak.tokens.v1").Update(source.bytes.data(), Digest::kSize)
      .Update(tokenizer_id.bytes.data(), Digest::kSize).Finish();
}

Result<Digest> TextCorpus::PutSource(std::string_view text) { return store_->Put(text); }

Result<std::string> TextCorpus::GetSource(const Digest& source) {
  Result<std::string> text = store_->Get(source);
  if (!text.has_value()) return text.error().WithContext("source " + source.Hex());
  return text;
}

Status TextCorpus::RemoveSource(const Digest& source) {
  std::vector<std::pair<Digest, Digest>> token_lists;  // TokenKey, blob
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, cached] : token_blobs_) {
      if (cached.source == source) token_lists.emplace_back(key, cached.blob);
    }
  }
  for (const auto& [key, blob] : token_lists) {
    Status s = store_->Remove(blob);
    if (!s.ok() && s.code() != StatusCode::kNotFound) return s.WithContext("token list of source " + source.Hex());
    std::lock_guard lock(mu_);
    token_blobs_.erase(key);
  }
  return store_->Remove(source).WithContext("source " + source.Hex());
}

Result<std::vector<int32_t>> TextCorpus::ReadTokens(const Digest& blob, const Digest& source, const Digest& tokenizer_id) {
  FAK_ASSIGN_OR_RETURN(std::string bytes, store_->Get(blob));
  if (bytes.size() < kTokenHeaderBytes || std::memcmp(bytes.data(), kTokenMagic, 8) != 0 ||
      std::memcmp(bytes.data() + 8, source.bytes.data(), Digest::kSize) != 0 ||
      std::memcmp(bytes.data() + 40, tokenizer_id.bytes.data(), Digest::kSize) != 0) {
    return Corruption("token blob " + blob.Hex() + " does not describe source " + source.Hex() + " under tokenizer " +
                      tokenizer_id.Hex());
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<uint8_t>(bytes[72 + i]);
  if (bytes.size() != kTokenHeaderBytes + 4 * n) return Corruption("token blob " + blob.Hex() + ": count does not match its size");
  std::vector<int32_t> ids(n);
  for (uint64_t k = 0; k < n; ++k) {
    uint32_t u = 0;
    for (int i = 3; i >= 0; --i) u = u << 8 | static_cast<uint8_t>(bytes[kTokenHeaderBytes + 4 * k + i]);
    ids[k] = static_cast<int32_t>(u);
  }
  return ids;
}

Result<std::vector<int32_t>> TextCorpus::Tokens(const Digest& source, const Tokenizer& tokenizer) {
  const Digest key = TokenKey(source, tokenizer.id());
  Digest blob;
  bool cached = false;
  {
    std::lock_guard lock(mu_);
    auto it = token_blobs_.find(key);
    if (it != token_blobs_.end()) {
      blob = it->second.blob;
      cached = true;
    }
  }
  if (cached) {
    Result<std::vector<int32_t>> ids = ReadTokens(blob, source, tokenizer.id());
    if (ids.has_value()) {
      std::lock_guard lock(mu_);
      ++stats_.token_hits;
      return ids;
    }
    if (ids.error().code() != StatusCode::kNotFound) return ids.error();
    // Evicted from the store: fall through and tokenize again.
  }
  FAK_ASSIGN_OR_RETURN(std::string text, GetSource(source));
  Result<std::vector<int32_t>> ids = tokenizer.Encode(text);
  if (!ids.has_value()) return ids.error().WithContext("tokenizing source " + source.Hex());
  FAK_ASSIGN_OR_RETURN(blob, store_->Put(EncodeTokens(source, tokenizer.id(), *ids)));
  std::lock_guard lock(mu_);
  token_blobs_[key] = TokenBlob{source, blob};
  ++stats_.token_misses;
  return ids;
}

TextCorpusStats TextCorpus::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace fak
