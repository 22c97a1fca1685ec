// Speculative decoding: drafters that guess a sequence's next tokens, so the model can check
// several in one forward pass.
//
// A loop that speculates (Generation::Run with a Speculator, the engine's step) asks a Drafter for
// up to k tokens, feeds [last token, draft...] to the model as one batch with the logits of every
// position, and lets the one Generation choose its token from each position's logits in order: a
// draft token is kept while the chosen token equals it; the first token that differs (or the one
// after a fully kept draft) is still a real choice, made from exact logits. The rejected tail is cut
// from the cache (KVCache::Truncate). Because fak's batched forward equals token-by-token decoding
// bit for bit (architecture §2.1), the tokens and every logit equal plain decoding's: the sampler
// draws once per position as it would have, the constraint, stops and penalties see the same
// tokens in the same order (witness Witness.SpeculativeEqualsPlain). A draft only changes speed.
//
// Two drafters: prompt lookup (n-gram: the tokens that followed the latest earlier occurrence of
// the context's last n tokens — agents' replies repeat tool output and earlier turns), and a
// draft model (a smaller model with the same vocabulary, decoded greedily on its own cache).
#ifndef FAK_MODEL_SPECULATION_H_
#define FAK_MODEL_SPECULATION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/model/model.h"

namespace fak {

enum class DraftSource {
  kNone,   // no speculation
  kNgram,  // prompt lookup in the sequence's own context
  kModel,  // SpeculationOptions::draft_model
};

struct SpeculationOptions {
  DraftSource source = DraftSource::kNone;  // Default: none.
  // Most tokens one draft proposes (1..kMaxDraftTokens). Default: 8.
  size_t max_draft_tokens = 8;
  // Prompt lookup: the longest and shortest context suffix searched for, longest first
  // (1 <= ngram_min <= ngram_max <= kMaxNgram). Default: 3 and 2.
  size_t ngram_max = 3;
  size_t ngram_min = 2;
  // kModel: the draft model, with the target's vocabulary size; shared, immutable.
  std::shared_ptr<const Model> draft_model;

  // InvalidArgument naming the field; for kModel, also a missing draft model or one whose
  // vocabulary differs from `target`'s.
  Status Validate(const Model& target) const;
};
inline constexpr size_t kMaxDraftTokens = 64;
inline constexpr size_t kMaxNgram = 16;

// Parses the `--speculate` spelling: "off", "ngram" or "ngram:K" (K draft tokens). InvalidArgument
// naming the text otherwise.
FAK_EXPORT Result<SpeculationOptions> ParseSpeculation(std::string_view text);

// Counts over a generation (or an engine's requests).
struct SpeculationStats {
  size_t drafts = 0;          // forward passes that verified a non-empty draft
  size_t draft_tokens = 0;    // tokens proposed and verified
  size_t accepted_tokens = 0; // of them, the ones kept (the rest were rejected and cut)
};

// Proposes the tokens likely to follow a context. One per sequence (a draft model keeps its own
// cache of the sequence); not thread-safe.
class FAK_EXPORT Drafter {
 public:
  virtual ~Drafter() = default;
  // At most `max_tokens` tokens to follow `context` (the prompt and every token generated so far);
  // empty when it has no guess.
  virtual Result<std::vector<int32_t>> Propose(std::span<const int32_t> context, size_t max_tokens) = 0;
};

// Prompt lookup: the max_tokens tokens after the latest earlier occurrence of the context's last n
// tokens, for n from ngram_max down to ngram_min (a match that runs into the context's end repeats
// itself: a loop is drafted whole). Empty when none occurs. Stateless; cost: a scan of the context per n.
FAK_EXPORT std::vector<int32_t> NgramDraft(std::span<const int32_t> context, size_t ngram_min, size_t ngram_max,
                                           size_t max_tokens);

// The drafter `options` name for one sequence of `target` (null for kNone); `options` must pass
// Validate (InvalidArgument otherwise). A draft-model drafter holds a cache of the draft model
// (its memory is outside any KV budget).
FAK_EXPORT Result<std::unique_ptr<Drafter>> NewDrafter(const SpeculationOptions& options, const Model& target);

}  // namespace fak

#endif  // FAK_MODEL_SPECULATION_H_
