// SegmentLedger: named spans laid end to end over one KVCache, evictable by name, exactly.
//
// Each segment (system prompt, user turn, tool result, assistant turn) records its token ids and
// the digest of its source text, so the cache can always be rebuilt from them. Evicting a segment
// shifts every later one down. The ledger knows when removal is exact: a segment is causally clean
// while it is the tail (nothing after it has attended to it), and in a one-layer model every
// removal is exact because survivors' K/V never depend on other tokens. Otherwise exact removal
// needs the dependent tail recomputed from its token ids (Repair::kRecomputeTail); the ledger never
// calls an approximate removal exact.
//
// Sliding-window memory (a ledger over Model::NewCache(KVMemory::kSlidingWindow)): the ledger knows
// what each layer still holds (cut_floor); an eviction the cache cannot cut exactly — it would reach
// back past rows a sliding layer dropped — rebuilds the cache from the surviving segments' tokens
// (exact; the report says rebuilt_from_text).
//
// The write-time bridge (AppendScreened): the segment is prefilled, screened, and if quarantined
// evicted before anything later is prefilled — the result equals never having seen it.
//
// Thread-safety: none (one session). The ledger owns its cache. Failed calls change nothing.
#ifndef FAK_SESSION_SEGMENT_LEDGER_H_
#define FAK_SESSION_SEGMENT_LEDGER_H_

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fak/core/digest.h"
#include "fak/core/export.h"
#include "fak/kv/kv_cache.h"
#include "fak/model/model.h"
#include "fak/screen/screen.h"
#include "fak/core/status.h"

namespace fak {

struct Segment {
  std::string id;
  SegmentKind kind = SegmentKind::kUser;
  std::vector<int32_t> tokens;
  Digest source_digest;  // sha256 of the source text the tokens came from
  size_t from = 0;       // offset of the first token in the cache
  Verdict verdict;
};

struct SegmentSpec {
  std::string id;
  SegmentKind kind = SegmentKind::kUser;
  std::vector<int32_t> tokens;
  Digest source_digest;
};

enum class Repair {
  kRequireExact,   // evict only if exact as is; otherwise FailedPrecondition. The default.
  kApproximate,    // evict anyway, re-rotating survivors; the report says exact = false
  kRecomputeTail,  // evict, then re-prefill every later segment from its token ids: exact
};

struct EvictionReport {
  std::string segment_id;
  size_t from = 0, n_evicted = 0;
  size_t n_rerotated = 0;   // surviving keys re-rotated from Kraw
  size_t n_recomputed = 0;  // surviving tokens re-prefilled
  bool rebuilt_from_text = false;  // a windowed cache no longer held what the cut needed: all re-prefilled
  bool exact = false;       // the cache now equals a run that never saw the segment
  Digest cache_digest_before, cache_digest_after;
  size_t cache_tokens_before = 0, cache_tokens_after = 0;  // cache sizes around the eviction
};

struct AppendResult {
  Verdict verdict;
  std::optional<EvictionReport> eviction;  // set when the segment was quarantined
  std::vector<float> logits;               // next-token logits after the segment; empty if evicted
};

class FAK_EXPORT SegmentLedger {
 public:
  // An empty ledger over a new cache of `model` (which must outlive the ledger).
  explicit SegmentLedger(const Model& model, KVMemory memory = KVMemory::kFull);
  // Adopts `cache` as already holding `segments` (their tokens must match it, in order).
  static Result<SegmentLedger> Adopt(const Model& model, KVCache cache, std::vector<SegmentSpec> segments);

  // Prefills the segment and records it. InvalidArgument for a duplicate or empty id, or no tokens.
  Result<std::vector<float>> Append(SegmentSpec spec);
  // Append, then screen `bytes` with `admitter`; a quarantine evicts the segment immediately.
  Result<AppendResult> AppendScreened(SegmentSpec spec, std::string_view bytes, const Admitter& admitter);

  Result<EvictionReport> Evict(std::string_view id, Repair repair = Repair::kRequireExact);
  // True when evicting `id` now, without repair, would be exact.
  Result<bool> IsCausallyClean(std::string_view id) const;

  const Segment* Find(std::string_view id) const;
  std::span<const Segment> segments() const { return segments_; }
  const KVCache& cache() const { return cache_; }
  // Every layer holds the KV of tokens [cut_floor(), size()) at least as far back as its window
  // needs: evicting a segment that starts at or after it is cut in place; one before it rebuilds.
  size_t cut_floor() const { return cache_.cut_floor(); }
  // Prefills more tokens as part of the last segment (e.g. a generated reply); keeps offsets true.
  Result<std::vector<float>> ExtendLast(std::span<const int32_t> tokens);

 private:
  SegmentLedger(const Model& model, KVCache cache) : model_(&model), cache_(std::move(cache)) {}
  size_t IndexOf(std::string_view id) const;  // segments_.size() when absent
  // A new cache of the same memory kind holding every segment but segments_[skip]'s tokens.
  Result<KVCache> RebuildWithout(size_t skip) const;

  const Model* model_;
  KVCache cache_;
  std::vector<Segment> segments_;
};

}  // namespace fak

#endif  // FAK_SESSION_SEGMENT_LEDGER_H_
