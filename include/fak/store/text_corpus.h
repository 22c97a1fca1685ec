// TextCorpus: the source text of every span, by SourceDigest, with token ids cached per tokenizer.
//
// Text is the durable source of truth (architecture §7): KV is rebuilt from it by tokenizing and
// prefilling. The token cache is keyed by (SourceDigest, TokenizerID), never by token ids alone,
// so a tokenizer change re-tokenizes instead of silently reusing stale ids. Token lists are stored
// as blobs that name their own key, so a crossed wire between keys is detected on read.
//
// Thread-safety: all methods may be called concurrently. The corpus does not own its BlobStore,
// which must outlive it. Cost: one blob per source text and one per (source, tokenizer) pair.
#ifndef FAK_STORE_TEXT_CORPUS_H_
#define FAK_STORE_TEXT_CORPUS_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fak/core/export.h"
#include "fak/store/blob_store.h"
#include "fak/core/digest.h"
#include "fak/core/status.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak {

struct TextCorpusStats {
  uint64_t token_hits = 0;    // Tokens() served from the cache
  uint64_t token_misses = 0;  // Tokens() that ran the tokenizer
};

class FAK_EXPORT TextCorpus {
 public:
  explicit TextCorpus(BlobStore& store) : store_(&store) {}

  // Stores `text`; returns its SourceDigest (sha256 of the bytes).
  Result<Digest> PutSource(std::string_view text);
  // The verified bytes of `source`; NotFound when the store does not hold them.
  Result<std::string> GetSource(const Digest& source);
  // Erases `source`: its text and every token list this corpus cached for it (token ids spell the
  // text back), through BlobStore::Remove, so a directory store keeps no plaintext. NotFound when
  // the text is absent, FailedPrecondition while it is pinned; token lists go first either way.
  Status RemoveSource(const Digest& source);
  // Pins / unpins the source text against eviction (see BlobStore::Pin).
  Status PinSource(const Digest& source) { return store_->Pin(source); }
  Status UnpinSource(const Digest& source) { return store_->Unpin(source); }

  // Token ids of `source` under `tokenizer`: from the cache when this (SourceDigest, TokenizerID)
  // pair was tokenized before, otherwise read the text, tokenize it and cache the ids.
  Result<std::vector<int32_t>> Tokens(const Digest& source, const Tokenizer& tokenizer);
  // The key a token list is cached under: sha256("fak.tokens.v1" | SourceDigest | TokenizerID).
  static Digest TokenKey(const Digest& source, const Digest& tokenizer_id);

  TextCorpusStats stats() const;
  BlobStore& store() { return *store_; }

 private:
  Result<std::vector<int32_t>> ReadTokens(const Digest& blob, const Digest& source, const Digest& tokenizer_id);

  BlobStore* store_;
  mutable std::mutex mu_;
  struct TokenBlob {
    Digest source, blob;
  };
  std::unordered_map<Digest, TokenBlob> token_blobs_;  // GUARDED_BY(mu_): TokenKey → its source and blob
  TextCorpusStats stats_;                           // GUARDED_BY(mu_)
};

}  // namespace fak

#endif  // FAK_STORE_TEXT_CORPUS_H_
