// SegmentLedger: append, screen, evict-by-name with the exactness bookkeeping.
#include "fak/session/segment_ledger.h"

#include <string>

namespace fak {

SegmentLedger::SegmentLedger(const Model& model, KVMemory memory) : model_(&model), cache_(model.NewCache(memory)) {}

Result<SegmentLedger> SegmentLedger::Adopt(const Model& model, KVCache cache, std::vector<SegmentSpec> specs) {
  SegmentLedger ledger(model, std::move(cache));
  size_t at = 0;
  for (SegmentSpec& s : specs) {
    const std::span<const int32_t> held = ledger.cache_.tokens();
    if (s.tokens.empty() || at + s.tokens.size() > held.size() ||
        !std::equal(s.tokens.begin(), s.tokens.end(), held.begin() + at)) {
      return InvalidArgument("Adopt: segment '" + s.id + "' does not match the cache's tokens at offset " + std::to_string(at));
    }
    if (ledger.IndexOf(s.id) != ledger.segments_.size()) return InvalidArgument("Adopt: duplicate segment id '" + s.id + "'");
    ledger.segments_.push_back(Segment{std::move(s.id), s.kind, std::move(s.tokens), s.source_digest, at, Verdict::Admit()});
    at += ledger.segments_.back().tokens.size();
  }
  if (at != ledger.cache_.size()) {
    return InvalidArgument("Adopt: segments cover " + std::to_string(at) + " of the cache's " +
                           std::to_string(ledger.cache_.size()) + " tokens");
  }
  return ledger;
}

size_t SegmentLedger::IndexOf(std::string_view id) const {
  for (size_t i = 0; i < segments_.size(); ++i)
    if (segments_[i].id == id) return i;
  return segments_.size();
}

const Segment* SegmentLedger::Find(std::string_view id) const {
  size_t i = IndexOf(id);
  return i == segments_.size() ? nullptr : &segments_[i];
}

Result<std::vector<float>> SegmentLedger::Append(SegmentSpec spec) {
  if (spec.id.empty()) return InvalidArgument("Append: segment id is empty");
  if (IndexOf(spec.id) != segments_.size()) return InvalidArgument("Append: duplicate segment id '" + spec.id + "'");
  if (spec.tokens.empty()) return InvalidArgument("Append: segment '" + spec.id + "' has no tokens");
  const size_t from = cache_.size();
  FAK_ASSIGN_OR_RETURN(std::vector<float> logits, model_->Prefill(&cache_, spec.tokens, LogitsMode::kLast));
  segments_.push_back(Segment{std::move(spec.id), spec.kind, std::move(spec.tokens), spec.source_digest, from, Verdict::Admit()});
  return logits;
}

Result<AppendResult> SegmentLedger::AppendScreened(SegmentSpec spec, std::string_view bytes, const Admitter& admitter) {
  const SegmentKind kind = spec.kind;
  const std::string id = spec.id;
  AppendResult out;
  FAK_ASSIGN_OR_RETURN(out.logits, Append(std::move(spec)));
  out.verdict = admitter.Screen(ScreenInput{.bytes = bytes, .kind = kind, .source_digest = std::nullopt});
  segments_.back().verdict = out.verdict;
  if (out.verdict.quarantined()) {
    // The segment is the tail: nothing has attended to it, so this eviction is exact.
    FAK_ASSIGN_OR_RETURN(EvictionReport report, Evict(id, Repair::kRequireExact));
    out.eviction = std::move(report);
    out.logits.clear();
  }
  return out;
}

Result<bool> SegmentLedger::IsCausallyClean(std::string_view id) const {
  const size_t i = IndexOf(id);
  if (i == segments_.size()) return NotFound("no segment '" + std::string(id) + "' in the ledger");
  return i + 1 == segments_.size() || model_->config().n_layers == 1;
}

Result<EvictionReport> SegmentLedger::Evict(std::string_view id, Repair repair) {
  const size_t i = IndexOf(id);
  if (i == segments_.size()) return NotFound("Evict: no segment '" + std::string(id) + "' in the ledger");
  FAK_ASSIGN_OR_RETURN(const bool clean, IsCausallyClean(id));
  if (!clean && repair == Repair::kRequireExact) {
    return FailedPrecondition("Evict: segment '" + std::string(id) + "' has been attended to by " +
                              std::to_string(cache_.size() - segments_[i].from - segments_[i].tokens.size()) +
                              " later tokens; removing it exactly needs Repair::kRecomputeTail "
                              "(or Repair::kApproximate to accept an inexact cache)");
  }
  EvictionReport r;
  r.segment_id = segments_[i].id;
  r.from = segments_[i].from;
  r.n_evicted = segments_[i].tokens.size();
  r.cache_digest_before = cache_.ComputeDigest();
  r.cache_tokens_before = cache_.size();
  const size_t tail = cache_.size() - r.from - r.n_evicted;
  if (r.from < cache_.cut_floor() && repair != Repair::kApproximate) {
    // A sliding layer dropped rows the cut needs: rebuild from the segments' tokens (exact).
    FAK_ASSIGN_OR_RETURN(cache_, RebuildWithout(i));
    r.n_recomputed = cache_.size();
    r.rebuilt_from_text = true;
    r.exact = true;
  } else if (clean || repair == Repair::kApproximate) {
    FAK_RETURN_IF_ERROR(cache_.Evict(r.from, r.n_evicted));
    r.n_rerotated = tail;
    r.exact = clean;
  } else {  // kRecomputeTail: the later segments' tokens are the source; re-prefill them.
    std::vector<int32_t> later(cache_.tokens().begin() + r.from + r.n_evicted, cache_.tokens().end());
    FAK_RETURN_IF_ERROR(cache_.Truncate(r.from));
    if (!later.empty()) {
      // Cannot fail: these exact tokens were prefilled at higher positions before.
      FAK_RETURN_IF_ERROR(model_->Prefill(&cache_, later, LogitsMode::kNone).status());
    }
    r.n_recomputed = later.size();
    r.exact = true;
  }
  segments_.erase(segments_.begin() + i);
  for (size_t j = i; j < segments_.size(); ++j) segments_[j].from -= r.n_evicted;
  r.cache_digest_after = cache_.ComputeDigest();
  r.cache_tokens_after = cache_.size();
  return r;
}

Result<KVCache> SegmentLedger::RebuildWithout(size_t skip) const {
  std::vector<int32_t> tokens;
  for (size_t j = 0; j < segments_.size(); ++j)
    if (j != skip) tokens.insert(tokens.end(), segments_[j].tokens.begin(), segments_[j].tokens.end());
  KVCache fresh = model_->NewCache(cache_.windowed() ? KVMemory::kSlidingWindow : KVMemory::kFull);
  if (!tokens.empty()) FAK_RETURN_IF_ERROR(model_->Prefill(&fresh, tokens, LogitsMode::kNone).status());
  return fresh;
}

Result<std::vector<float>> SegmentLedger::ExtendLast(std::span<const int32_t> tokens) {
  if (segments_.empty()) return FailedPrecondition("ExtendLast: the ledger has no segment to extend");
  FAK_ASSIGN_OR_RETURN(std::vector<float> logits, model_->Prefill(&cache_, tokens, LogitsMode::kLast));
  segments_.back().tokens.insert(segments_.back().tokens.end(), tokens.begin(), tokens.end());
  return logits;
}

}  // namespace fak
