// TierPager: page-in of verified slabs from a KV tier store.
#include "fak/kvtier/tier_pager.h"

#include <algorithm>
#include <memory>

#include "fak/kvtier/slab_file.h"
#include "src/kv/kv_cache_access.h"

namespace fak {

struct TierPager::Candidate {
  std::shared_ptr<const KVSlab> slab;  // already cut to start at the walk's position
  size_t bytes = 0;
};

namespace {

std::string Short(const TierKey& k) { return "[.., " + std::to_string(k.end) + ") " + k.id.substr(0, 12); }

PageInFailure FromProblem(SlabFileProblem p) {
  switch (p) {
    case SlabFileProblem::kTruncated: return PageInFailure::kTruncated;
    case SlabFileProblem::kChecksum: return PageInFailure::kChecksum;
    default: return PageInFailure::kMalformed;
  }
}

}  // namespace

TierPager::TierPager(KVTierStore& tier, const AccessPolicy& access, const Denylist* denylist)
    : tier_(tier), access_(access), denylist_(denylist) {}

TierPagerStats TierPager::Stats() const {
  TierPagerStats s;
  s.page_ins = page_ins_.load();
  s.served_slabs = served_slabs_.load();
  s.paged_tokens = paged_tokens_.load();
  s.paged_bytes = paged_bytes_.load();
  for (int i = 0; i < kNumPageInFailures; ++i) s.refused[i] = refused_[i].load();
  return s;
}

PageInFailure TierPager::Verify(const ResidentClaim& claim, std::span<const int32_t> tokens, const KVShape& shape,
                                size_t pos, const TierKey& key, Candidate* out, std::string* detail) {
  Result<std::string> bytes = tier_.Get(key);
  if (!bytes.has_value()) {
    if (bytes.error().code() == StatusCode::kNotFound) return PageInFailure::kAbsent;
    *detail = Short(key) + ": " + bytes.error().ToString();
    return bytes.error().code() == StatusCode::kUnavailable ? PageInFailure::kUnavailable : PageInFailure::kMalformed;
  }
  SlabFileProblem problem = SlabFileProblem::kNone;
  // The K/Kraw/V section is hashed once, below, by the gate against the manifest's checksum.
  Result<SlabFile> file = DecodeSlabFile(*bytes, &problem, /*check_kv_section=*/false);
  if (!file.has_value()) {
    *detail = Short(key) + ": " + file.error().ToString();
    return FromProblem(problem);
  }
  const KVManifest& m = file->manifest;
  KVSlab& slab = file->slab;
  const size_t from = m.binding.tokens.from, end = m.binding.tokens.end();
  if (end != key.end || slab.start_position != from || slab.size() != m.binding.tokens.count) {
    *detail = Short(key) + ": the slab's span does not match its manifest or key";
    return PageInFailure::kMalformed;
  }
  if (slab.shape.n_layers != shape.n_layers || slab.shape.n_kv_heads != shape.n_kv_heads || slab.shape.head_dim != shape.head_dim) {
    *detail = Short(key) + ": the slab has another KV shape";
    return PageInFailure::kMalformed;
  }
  slab.shape = shape;  // max_tokens is the serving model's (the rows are what matter)
  // The gate, over the slab's actual bytes: tenancy first, then every axis, then the checksum.
  ResidentClaim span_claim{claim.binding, claim.tenant};
  Result<BindingTuple> bound = BindSpan(claim.binding, tokens, from, end - from);
  if (!bound.has_value()) {
    *detail = Short(key) + ": " + bound.error().ToString();
    return PageInFailure::kMalformed;
  }
  span_claim.binding = *bound;
  span_claim.binding.integrity_checksum = Digest{};
  ClaimVerdict v = CheckResidentClaim(span_claim, m, access_, KVSlabChecksum(slab));
  if (!v.hit()) {
    *detail = Short(key) + ": " + v.ToString();
    switch (v.outcome) {
      case ClaimOutcome::kRefuse: return PageInFailure::kTenant;
      case ClaimOutcome::kCorrupt: return PageInFailure::kChecksum;
      default: return PageInFailure::kAxis;
    }
  }
  if (!std::equal(slab.tokens.begin(), slab.tokens.end(), tokens.begin() + static_cast<std::ptrdiff_t>(from))) {
    *detail = Short(key) + ": the slab's token ids differ from the context";  // unreachable past the span digest
    return PageInFailure::kAxis;
  }
  if (SourceSetDigest(file->sources, from, end - from, m.binding.span_digest) != m.source_digest) {
    *detail = Short(key) + ": the recorded source runs do not hash to the manifest's source_digest";
    return PageInFailure::kChecksum;
  }
  if (denylist_ != nullptr) {
    std::vector<Digest> sources{m.source_digest};
    for (const SourceSpan& r : file->sources) sources.push_back(r.source);
    for (const Digest& d : sources) {
      Result<bool> listed = denylist_->IsQuarantined(d);
      if (!listed.has_value()) {
        *detail = Short(key) + ": the denylist cannot be asked now: " + listed.error().ToString();
        return PageInFailure::kUnavailable;
      }
      if (*listed) {
        *detail = Short(key) + ": derived from source " + d.Hex().substr(0, 16) + ", which is on the denylist";
        return PageInFailure::kDenied;
      }
    }
  }
  out->bytes = bytes->size();
  out->slab = std::make_shared<const KVSlab>(from < pos ? slab.Slice(pos - from, end - pos) : std::move(slab));
  return PageInFailure::kNone;
}

PageInResult TierPager::PageIn(const ResidentClaim& claim, std::span<const int32_t> tokens, size_t limit, KVCache& cache) {
  page_ins_.fetch_add(1, std::memory_order_relaxed);
  PageInResult result;
  limit = std::min(limit, tokens.size());
  if (cache.size() > tokens.size() || !std::equal(cache.tokens().begin(), cache.tokens().end(), tokens.begin())) {
    result.failure = PageInFailure::kMalformed;
    result.detail = "PageIn: the session cache does not hold a prefix of the context";
    refused_[static_cast<int>(result.failure)].fetch_add(1, std::memory_order_relaxed);
    return result;
  }
  Result<std::vector<uint64_t>> ends = tier_.Ends();
  if (!ends.has_value()) {
    result.failure = ends.error().code() == StatusCode::kUnavailable ? PageInFailure::kUnavailable : PageInFailure::kMalformed;
    result.detail = ends.error().ToString();
    refused_[static_cast<int>(result.failure)].fetch_add(1, std::memory_order_relaxed);
    return result;
  }
  const std::string ns_order[2] = {claim.tenant, std::string()};
  for (size_t pos = cache.size(); pos < limit;) {
    bool advanced = false;
    PageInFailure last = PageInFailure::kAbsent;
    std::string last_detail = "no entry continues the context at token " + std::to_string(pos);
    // Furthest end first: one long slab beats several short ones.
    for (auto e = ends->rbegin(); e != ends->rend() && !advanced; ++e) {
      if (*e <= pos || *e > limit) continue;
      const Digest span = SpanDigestOf(tokens.first(*e));
      for (const std::string& ns : ns_order) {
        Candidate c;
        std::string detail;
        const PageInFailure f = Verify(claim, tokens, cache.shape(), pos, TierKeyFor(claim.binding, ns, span, *e), &c, &detail);
        if (f == PageInFailure::kAbsent) continue;
        if (f != PageInFailure::kNone) {
          refused_[static_cast<int>(f)].fetch_add(1, std::memory_order_relaxed);
          last = f;
          last_detail = std::move(detail);
          continue;
        }
        if (c.slab->start_position != pos) continue;  // starts past what is held: a shorter end may chain
        const size_t n = c.slab->size();
        if (!internal::KVCacheAccess::AppendShared(cache, std::move(c.slab)).ok()) {
          last = PageInFailure::kMalformed;
          last_detail = "the slab does not fit the session cache";
          continue;
        }
        served_slabs_.fetch_add(1, std::memory_order_relaxed);
        paged_tokens_.fetch_add(n, std::memory_order_relaxed);
        paged_bytes_.fetch_add(c.bytes, std::memory_order_relaxed);
        result.paged_tokens += n;
        result.paged_bytes += c.bytes;
        pos += n;
        advanced = true;
        break;
      }
    }
    if (!advanced) {
      if (last == PageInFailure::kAbsent) refused_[static_cast<int>(last)].fetch_add(1, std::memory_order_relaxed);
      result.failure = last;
      result.detail = std::move(last_detail);
      break;
    }
  }
  return result;
}

}  // namespace fak
