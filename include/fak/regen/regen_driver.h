// RegenDriver: rebuild a model's KV from the durable text after a model change (architecture §9).
//
// A rollout changes the ModelID axis, so every cached span misses at once (the cliff). The text
// survived in the TextCorpus, so the new model's cache is rebuilt from it — bytes → re-tokenize with
// the *serving* tokenizer → prefill — lazily on a miss (Materialize) or eagerly, in chunks a
// BackfillScheduler runs behind live work (PrepareBackfill). The quarantine denylist and the
// screening chain are consulted before any text is prefilled. The other regen parts:
// backfill_scheduler.h, hot_set.h, rollout.h (policies), regime_oracle.h (validation).
// Definitions (verdicts, policies): docs/regen.md.
#ifndef FAK_REGEN_REGEN_DRIVER_H_
#define FAK_REGEN_REGEN_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/gate/binding_tuple.h"
#include "fak/gate/resident_claim.h"
#include "fak/kv/kv_cache.h"
#include "fak/model/model.h"
#include "fak/regen/backfill_scheduler.h"
#include "fak/regen/transcript_ref.h"
#include "fak/screen/screen.h"
#include "fak/session/radix_tree.h"
#include "fak/store/text_corpus.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak {

// ---- Materialize: "give me this context" ----

// HIT: resident under the claim, served. FAULT: held by a lower tier, paged in. RECOMPUTE: text
// present, regenerated. REFUSE: policy, tenancy or quarantine forbids it. ABSTAIN: neither KV nor
// (screenable) text is available, or the claim names a regime this driver cannot produce.
enum class MaterializeVerdict : int { kHit = 0, kFault, kRecompute, kRefuse, kAbstain };
inline constexpr int kNumMaterializeVerdicts = 5;
FAK_EXPORT std::string_view MaterializeVerdictName(MaterializeVerdict verdict);  // "HIT", "FAULT", ...

struct Materialized {
  MaterializeVerdict verdict = MaterializeVerdict::kAbstain;
  std::string detail;            // why (the segment, axis or gate verdict at fault)
  std::optional<KVCache> cache;  // the whole context; set for HIT, FAULT and RECOMPUTE
  std::vector<int32_t> tokens;   // the context's ids under the serving tokenizer (when known)
  std::vector<float> logits;     // [vocab] next-token logits after the context (with a cache)
  std::vector<SourceSpan> sources;  // which run of `tokens` each transcript segment produced
  size_t reused_tokens = 0;      // served from the tree or paged in
  size_t prefilled_tokens = 0;   // computed by this call (a HIT still prefills the last token)
};

// The model a driver serves and the tree its KV lives in. Not owned; all must outlive the driver.
struct RegenTarget {
  const Model* model = nullptr;
  const Tokenizer* tokenizer = nullptr;
  RadixTree* tree = nullptr;  // built over *model and *tokenizer
};


// Counters by verdict plus token totals. Snapshot of relaxed atomics.
struct RegenStats {
  uint64_t verdicts[kNumMaterializeVerdicts] = {};
  uint64_t reused_tokens = 0, prefilled_tokens = 0;
  uint64_t backfill_prepared = 0, backfill_refused = 0, backfill_skipped = 0;
  uint64_t backfilled_tokens = 0;  // prefilled by backfill tasks
  uint64_t paged_tokens = 0;       // paged in from the lower tier (FAULT, or a partial page-in)
  uint64_t page_in_failures[kNumPageInFailures] = {};  // page-ins that stopped short, by reason
  uint64_t count(MaterializeVerdict v) const { return verdicts[static_cast<int>(v)]; }
};

// Serves contexts for one model from its radix tree, regenerating them from the corpus text.
// Thread-safety: all methods may be called concurrently (the tree and corpus are thread-safe; the
// counters are atomic). Cost: a RECOMPUTE prefills the unmatched suffix; a HIT prefills one token.
class FAK_EXPORT RegenDriver {
 public:
  // `screen` (with its denylist) judges text before it is prefilled; it must outlive the driver
  // and not be reconfigured while the driver runs.
  RegenDriver(RegenTarget target, TextCorpus& corpus, const ScreenChain& screen);
  ~RegenDriver();
  RegenDriver(const RegenDriver&) = delete;
  RegenDriver& operator=(const RegenDriver&) = delete;

  // Decides and acts: denylist first (REFUSE), then the claim's regime (ABSTAIN when it is not this
  // driver's), the serving tokenizer's ids from the corpus (ABSTAIN when the text is gone), the
  // tree's gate (HIT, or REFUSE on a tenancy denial), the pager (FAULT), then screening and
  // regeneration of the unmatched suffix (RECOMPUTE, inserted under the claim's tenant).
  // Errors only for failures that are not verdicts (I/O, corruption, an empty transcript).
  Result<Materialized> Materialize(const ResidentClaim& claim, const TranscriptRef& transcript);
  // Materialize with this tree's own regime for `tenant`.
  Result<Materialized> Materialize(std::string_view tenant, const TranscriptRef& transcript);

  // The context's token ids under the serving tokenizer (never another tokenizer's cached ids).
  Result<std::vector<int32_t>> ContextTokens(const TranscriptRef& transcript);
  // A chunked regeneration of `transcript` into the tree for `tenant`, for the scheduler. Denylist
  // and screening come first: FailedPrecondition naming the segment when one is quarantined (then
  // nothing is ever prefilled); NotFound when a text is gone. A task whose context is already
  // resident has remaining_tokens() == 0. The task must not outlive the driver.
  Result<std::unique_ptr<BackfillTask>> PrepareBackfill(std::string tenant, const TranscriptRef& transcript);

  ResidentClaim ClaimFor(std::string tenant) const { return target_.tree->ClaimFor(std::move(tenant)); }
  const RegenTarget& target() const { return target_; }
  RegenStats Stats() const;

  struct Counters;  // internal

 private:
  Status ScreenSegments(const TranscriptRef& transcript, std::string* refused_detail);
  std::optional<std::string> DenylistHit(const TranscriptRef& transcript) const;
  Result<Materialized> Regenerate(const ResidentClaim& claim, const TranscriptRef& transcript, Materialized out,
                                  LookupResult lookup);
  // ContextTokens, also saying which run of the ids each segment produced (the tree's source index).
  Result<std::vector<int32_t>> ContextTokens(const TranscriptRef& transcript, std::vector<SourceSpan>* spans);

  RegenTarget target_;
  TextCorpus* corpus_;
  const ScreenChain* screen_;
  std::unique_ptr<Counters> counters_;
};

}  // namespace fak

#endif  // FAK_REGEN_REGEN_DRIVER_H_
