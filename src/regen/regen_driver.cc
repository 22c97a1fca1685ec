// RegenDriver: Materialize (HIT / FAULT / RECOMPUTE / REFUSE / ABSTAIN) and chunked backfill tasks.
//
// Order of checks is the safety argument: the denylist is consulted by digest before any text is
// read, the screening chain before any text is prefilled, and token ids always come from the
// corpus keyed by the *serving* tokenizer's id, so another tokenizer's ids are never reused.
#include <algorithm>
#include <atomic>
#include <string>
#include <utility>

#include "fak/regen/regen_driver.h"

namespace fak {

struct RegenDriver::Counters {
  std::atomic<uint64_t> verdicts[kNumMaterializeVerdicts] = {};
  std::atomic<uint64_t> reused_tokens{0}, prefilled_tokens{0};
  std::atomic<uint64_t> backfill_prepared{0}, backfill_refused{0}, backfill_skipped{0}, backfilled_tokens{0};
  std::atomic<uint64_t> paged_tokens{0};
  std::atomic<uint64_t> page_in_failures[kNumPageInFailures] = {};
};

namespace {

std::string ShortHex(const Digest& d) { return d.Hex().substr(0, 16); }

void Add(std::atomic<uint64_t>& c, uint64_t n) { c.fetch_add(n, std::memory_order_relaxed); }

// The regime axes of `binding` (span fields cleared), to compare a claim with a driver's regime.
BindingTuple RegimeOf(BindingTuple binding) {
  binding.span_digest = Digest{};
  binding.tokens = TokenRange{};
  binding.integrity_checksum = Digest{};
  return binding;
}

// Regenerates one context into the tree in bounded chunks (the scheduler's low-priority work).
class RegenBackfillTask final : public BackfillTask {
 public:
  RegenBackfillTask(RegenTarget target, std::string tenant, std::vector<int32_t> tokens,
                    std::atomic<uint64_t>* backfilled)
      : target_(target), tenant_(std::move(tenant)), tokens_(std::move(tokens)), backfilled_(backfilled) {
    // Already resident (all but the last token, which a lookup always leaves): nothing to do.
    done_ = tokens_.size() < 2 || target_.tree->MatchLength(tokens_, tenant_) + 1 >= tokens_.size();
  }

  // Safe to call while another thread runs a chunk (the scheduler's Stats does).
  size_t remaining_tokens() const override { return done_.load() ? 0 : tokens_.size() - position_.load(); }

  Result<size_t> RunChunk(size_t max_tokens) override {
    if (done_.load() || max_tokens == 0) return size_t{0};
    if (!cache_) {  // the lookup is deferred to the first chunk, so earlier backfills are reused
      LookupResult r = target_.tree->Lookup(target_.tree->ClaimFor(tenant_), tokens_);
      position_.store(r.matched_tokens);
      cache_.emplace(std::move(r.cache));
      lease_ = std::move(r.lease);
    }
    const size_t at = position_.load();
    const size_t n = std::min(max_tokens, tokens_.size() - at);
    std::span<const int32_t> chunk(tokens_.data() + at, n);
    FAK_RETURN_IF_ERROR(target_.model->Prefill(&*cache_, chunk, LogitsMode::kNone).error());
    position_.store(at + n);
    Add(*backfilled_, n);
    if (at + n == tokens_.size()) {
      Status inserted = target_.tree->Insert(tenant_, tokens_, *cache_);
      done_ = true;
      cache_.reset();
      lease_ = Lease();
      FAK_RETURN_IF_ERROR(inserted);
    }
    return n;
  }

 private:
  RegenTarget target_;
  std::string tenant_;
  std::vector<int32_t> tokens_;
  std::atomic<uint64_t>* backfilled_;
  std::optional<KVCache> cache_;
  Lease lease_;
  std::atomic<size_t> position_{0};
  std::atomic<bool> done_{false};
};

}  // namespace

std::string_view MaterializeVerdictName(MaterializeVerdict verdict) {
  switch (verdict) {
    case MaterializeVerdict::kHit: return "HIT";
    case MaterializeVerdict::kFault: return "FAULT";
    case MaterializeVerdict::kRecompute: return "RECOMPUTE";
    case MaterializeVerdict::kRefuse: return "REFUSE";
    case MaterializeVerdict::kAbstain: return "ABSTAIN";
  }
  return "?";
}

RegenDriver::RegenDriver(RegenTarget target, TextCorpus& corpus, const ScreenChain& screen)
    : target_(target), corpus_(&corpus), screen_(&screen), counters_(std::make_unique<Counters>()) {}
RegenDriver::~RegenDriver() = default;

RegenStats RegenDriver::Stats() const {
  RegenStats s;
  for (int i = 0; i < kNumMaterializeVerdicts; ++i) s.verdicts[i] = counters_->verdicts[i].load();
  s.reused_tokens = counters_->reused_tokens.load();
  s.prefilled_tokens = counters_->prefilled_tokens.load();
  s.backfill_prepared = counters_->backfill_prepared.load();
  s.backfill_refused = counters_->backfill_refused.load();
  s.backfill_skipped = counters_->backfill_skipped.load();
  s.backfilled_tokens = counters_->backfilled_tokens.load();
  s.paged_tokens = counters_->paged_tokens.load();
  for (int i = 0; i < kNumPageInFailures; ++i) s.page_in_failures[i] = counters_->page_in_failures[i].load();
  return s;
}

std::optional<std::string> RegenDriver::DenylistHit(const TranscriptRef& transcript) const {
  const Denylist& deny = screen_->denylist();
  for (size_t i = 0; i < transcript.segments.size(); ++i) {
    const Result<bool> listed = deny.IsQuarantined(transcript.segments[i]);
    const std::string seg = "segment " + std::to_string(i) + " (" + ShortHex(transcript.segments[i]) + ")";
    // Unknown refuses this call only (fail closed); nothing is recorded, so a later call may pass.
    if (!listed.has_value()) return seg + ": the denylist cannot be asked now, retry later: " + listed.error().ToString();
    if (*listed) return seg + " is on the quarantine denylist";
  }
  return std::nullopt;
}

// Reads and screens every segment's text. OK with *refused_detail set on a quarantine; NotFound
// when a text is gone (it cannot be screened, so it is never prefilled).
Status RegenDriver::ScreenSegments(const TranscriptRef& transcript, std::string* refused_detail) {
  for (size_t i = 0; i < transcript.segments.size(); ++i) {
    const Digest& d = transcript.segments[i];
    Result<std::string> text = corpus_->GetSource(d);
    if (!text.has_value()) return text.error().WithContext("transcript.segments[" + std::to_string(i) + "]");
    Verdict v = screen_->Screen(ScreenInput{*text, SegmentKind::kUser, d});
    if (v.quarantined()) {
      *refused_detail = "segment " + std::to_string(i) + " (" + ShortHex(d) + ") " +
                        (v.unavailable() ? "withheld (undecided, retry later) by " : "quarantined by ") + v.detector +
                        ": " + v.reason;
      return Status::Ok();
    }
  }
  return Status::Ok();
}

Result<std::vector<int32_t>> RegenDriver::ContextTokens(const TranscriptRef& transcript) {
  return ContextTokens(transcript, nullptr);
}

Result<std::vector<int32_t>> RegenDriver::ContextTokens(const TranscriptRef& transcript, std::vector<SourceSpan>* spans) {
  if (transcript.segments.empty()) return InvalidArgument("transcript.segments: empty");
  std::vector<int32_t> tokens;
  for (size_t i = 0; i < transcript.segments.size(); ++i) {
    Result<std::vector<int32_t>> ids = corpus_->Tokens(transcript.segments[i], *target_.tokenizer);
    if (!ids.has_value()) return ids.error().WithContext("transcript.segments[" + std::to_string(i) + "]");
    if (spans != nullptr && !ids->empty()) spans->push_back(SourceSpan{tokens.size(), ids->size(), transcript.segments[i]});
    tokens.insert(tokens.end(), ids->begin(), ids->end());
  }
  return tokens;
}

Result<Materialized> RegenDriver::Materialize(std::string_view tenant, const TranscriptRef& transcript) {
  return Materialize(ClaimFor(std::string(tenant)), transcript);
}

Result<Materialized> RegenDriver::Materialize(const ResidentClaim& claim, const TranscriptRef& transcript) {
  if (transcript.segments.empty()) return InvalidArgument("transcript.segments: empty");
  Materialized out;
  auto finish = [&](MaterializeVerdict v, std::string detail) -> Result<Materialized> {
    out.verdict = v;
    out.detail = std::move(detail);
    Add(counters_->verdicts[static_cast<int>(v)], 1);
    Add(counters_->reused_tokens, out.reused_tokens);
    Add(counters_->prefilled_tokens, out.prefilled_tokens);
    return std::move(out);
  };
  if (std::optional<std::string> deny = DenylistHit(transcript)) return finish(MaterializeVerdict::kRefuse, *deny);
  if (!IsValidTenant(claim.tenant)) return finish(MaterializeVerdict::kRefuse, "claim.tenant: invalid tenant name");
  const BindingTuple regime = RegimeOf(ClaimFor(claim.tenant).binding);
  if (std::optional<BindingAxis> axis = FirstDifferingAxis(RegimeOf(claim.binding), regime)) {
    return finish(MaterializeVerdict::kAbstain, "no producer here for the claimed " + std::string(BindingAxisName(*axis)) +
                                                    ": " + DescribeAxisDifference(*axis, claim.binding, regime));
  }
  Result<std::vector<int32_t>> tokens = ContextTokens(transcript, &out.sources);
  if (!tokens.has_value()) {
    if (tokens.error().code() != StatusCode::kNotFound) return tokens.error();
    return finish(MaterializeVerdict::kAbstain, std::string(tokens.error().message()));
  }
  out.tokens = std::move(*tokens);
  LookupResult lookup = target_.tree->Lookup(claim, out.tokens);
  if (lookup.gate.outcome == ClaimOutcome::kRefuse) return finish(MaterializeVerdict::kRefuse, lookup.gate.ToString());
  if (lookup.matched_tokens > 0 && lookup.matched_tokens + 1 == out.tokens.size()) {
    out.reused_tokens = lookup.matched_tokens;
    Result<std::vector<float>> logits =
        target_.model->Prefill(&lookup.cache, std::span<const int32_t>(out.tokens).last(1), LogitsMode::kLast);
    if (!logits.has_value()) return logits.error();
    out.prefilled_tokens = 1;
    out.logits = std::move(*logits);
    out.cache.emplace(std::move(lookup.cache));
    return finish(MaterializeVerdict::kHit, {});
  }
  Result<Materialized> r = Regenerate(claim, transcript, std::move(out), std::move(lookup));
  if (!r.has_value()) return r.error();
  out = std::move(*r);
  return finish(out.verdict, out.detail);
}

// The miss path: a lower tier first (FAULT), then screening and recompute of the suffix (RECOMPUTE).
Result<Materialized> RegenDriver::Regenerate(const ResidentClaim& claim, const TranscriptRef& transcript,
                                             Materialized out, LookupResult lookup) {
  const size_t n = out.tokens.size();
  if (target_.tree->pages_in()) {
    // The tree's pager (FAULT): what it verified becomes radix nodes, so the next lookup is a HIT.
    PagedPrefix paged;
    lookup = target_.tree->LookupOrPageIn(claim, out.tokens, out.sources, &paged);
    if (paged.failure != PageInFailure::kNone) {
      Add(counters_->page_in_failures[static_cast<int>(paged.failure)], 1);
      out.detail = "page-in stopped: " + std::string(PageInFailureName(paged.failure)) + ": " + paged.detail;
    }
    if (paged.paged_tokens > 0) {
      Add(counters_->paged_tokens, paged.paged_tokens);
      FAK_RETURN_IF_ERROR(paged.inserted);
      if (lookup.matched_tokens + 1 == n) {
        FAK_ASSIGN_OR_RETURN(out.logits, target_.model->Prefill(&lookup.cache, std::span<const int32_t>(out.tokens).last(1)));
        out.reused_tokens = n - 1;
        out.prefilled_tokens = 1;
        out.cache.emplace(std::move(lookup.cache));
        out.verdict = MaterializeVerdict::kFault;
        return out;
      }
    }
  }
  std::string refused;
  Status screened = ScreenSegments(transcript, &refused);
  if (!screened.ok()) {
    if (screened.code() != StatusCode::kNotFound) return screened;
    out.verdict = MaterializeVerdict::kAbstain;
    out.detail = "text unavailable to screen and regenerate: " + std::string(screened.message());
    return out;
  }
  if (!refused.empty()) {
    out.verdict = MaterializeVerdict::kRefuse;
    out.detail = std::move(refused);
    return out;
  }
  out.reused_tokens = lookup.matched_tokens;
  std::span<const int32_t> suffix = std::span<const int32_t>(out.tokens).subspan(lookup.matched_tokens);
  FAK_ASSIGN_OR_RETURN(out.logits, target_.model->Prefill(&lookup.cache, suffix, LogitsMode::kLast));
  out.prefilled_tokens = suffix.size();
  FAK_RETURN_IF_ERROR(target_.tree->Insert(claim.tenant, out.tokens, lookup.cache, out.sources));
  out.cache.emplace(std::move(lookup.cache));
  out.verdict = MaterializeVerdict::kRecompute;
  return out;
}

Result<std::unique_ptr<BackfillTask>> RegenDriver::PrepareBackfill(std::string tenant, const TranscriptRef& transcript) {
  if (transcript.segments.empty()) return InvalidArgument("transcript.segments: empty");
  if (!IsValidTenant(tenant)) return InvalidArgument("tenant: invalid tenant name '" + tenant + "'");
  if (std::optional<std::string> deny = DenylistHit(transcript)) {
    Add(counters_->backfill_refused, 1);
    return FailedPrecondition("backfill refused: " + *deny);
  }
  std::string refused;
  FAK_RETURN_IF_ERROR(ScreenSegments(transcript, &refused));
  if (!refused.empty()) {
    Add(counters_->backfill_refused, 1);
    return FailedPrecondition("backfill refused: " + refused);
  }
  FAK_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, ContextTokens(transcript));
  auto task = std::make_unique<RegenBackfillTask>(target_, std::move(tenant), std::move(tokens),
                                                  &counters_->backfilled_tokens);
  Add(task->done() ? counters_->backfill_skipped : counters_->backfill_prepared, 1);
  return std::unique_ptr<BackfillTask>(std::move(task));
}

}  // namespace fak
