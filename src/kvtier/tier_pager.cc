// TierPager: page-in of verified slabs from a KV tier store.
#include "fak/kvtier/tier_pager.h"

#include <algorithm>
#include <future>
#include <memory>
#include <new>
#include <optional>
#include <system_error>

#include "fak/kvtier/slab_file.h"
#include "src/kv/kv_cache_access.h"
#include "src/session/verified_slab.h"

namespace fak {

struct TierPager::Candidate {
  std::shared_ptr<const KVSlab> slab;  // already cut to start at the walk's position
  size_t bytes = 0;
};

// A candidate read and decoded (not yet verified against its manifest or the gate).
struct TierPager::Fetched {
  bool found = false;  // false: no remaining candidate exists and starts at or before the position
  size_t index = 0;    // the candidate's place in the walk's order at its position
  TierKey key;
  size_t bytes = 0;                        // the file's size
  Status error;                            // Get failed (never NotFound), or the file did not decode
  SlabFileProblem problem = SlabFileProblem::kNone;  // when it did not decode
  std::optional<SlabFile> file;            // when it decoded
};

namespace {

// tier.Open(key, max_bytes), with anything a store throws (bad_alloc on a size it trusted) made a
// ResourceExhausted error like its own refusal of an oversized entry: a page-in never throws.
Result<std::unique_ptr<RandomAccessFile>> OpenBoundedFrom(KVTierStore& tier, const TierKey& key, uint64_t max_bytes) {
  try {
    return tier.Open(key, max_bytes);
  } catch (const std::bad_alloc& e) {
    return ResourceExhausted(std::string("kv tier: entry ") + key.id.substr(0, 16) + ": cannot allocate: " + e.what());
  } catch (const std::exception& e) {
    return Corruption(std::string("kv tier: entry ") + key.id.substr(0, 16) + ": " + e.what());
  }
}

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

TierPager::Fetched TierPager::Fetch(const ResidentClaim& claim, std::span<const int32_t> tokens, std::span<const uint64_t> ends,
                                    const KVShape& shape, size_t pos, size_t limit, size_t from_index) const {
  // The walk's order at `pos`: stored ends furthest first (one long slab beats several short ones),
  // each in the claim tenant's namespace, then the public one.
  const std::string ns_order[2] = {claim.tenant, std::string()};
  size_t index = 0;
  for (auto e = ends.rbegin(); e != ends.rend(); ++e) {
    if (*e <= pos || *e > limit) continue;
    if (index + 2 <= from_index) {
      index += 2;
      continue;
    }
    const Digest span = SpanDigestOf(tokens.first(*e));
    for (const std::string& ns : ns_order) {
      if (index++ < from_index) continue;
      Fetched f;
      f.key = TierKeyFor(claim.binding, ns, span, *e);
      // What a slab of the serving shape ending here could take at most; a larger entry is refused
      // by the store before it reads or allocates it (kOversized).
      Result<std::unique_ptr<RandomAccessFile>> entry = OpenBoundedFrom(tier_, f.key, MaxSlabFileBytes(shape, *e));
      if (!entry.has_value() && entry.error().code() == StatusCode::kNotFound) continue;
      f.found = true;
      f.index = index - 1;
      if (!entry.has_value()) {
        f.error = entry.error();
        return f;
      }
      f.bytes = (*entry)->size();
      // Decoded straight from the entry, the K/Kraw/V section hashed once, chunk by chunk as it is
      // read (slab_checksum); the gate compares that with the manifest's checksum in Verify.
      Result<SlabFile> file = DecodeSlabFile(**entry, &f.problem, /*check_kv_section=*/false);
      if (!file.has_value()) {
        f.error = file.error();
        return f;
      }
      // One that starts past the position cannot be served there: skipped before any hashing (a
      // shorter end may chain). Nothing is served from this unverified look at its manifest.
      if (file->manifest.binding.tokens.from > pos) continue;
      f.file = std::move(*file);
      return f;
    }
  }
  return Fetched{};
}

PageInFailure TierPager::Verify(const ResidentClaim& claim, std::span<const int32_t> tokens, const KVShape& shape,
                                size_t pos, Fetched& fetched, Candidate* out, std::string* detail) {
  const TierKey& key = fetched.key;
  if (!fetched.file.has_value()) {
    *detail = Short(key) + ": " + fetched.error.ToString();
    if (fetched.problem != SlabFileProblem::kNone) return FromProblem(fetched.problem);
    switch (fetched.error.code()) {
      case StatusCode::kUnavailable: return PageInFailure::kUnavailable;
      case StatusCode::kResourceExhausted: return PageInFailure::kOversized;
      default: return PageInFailure::kMalformed;
    }
  }
  std::optional<SlabFile>& file = fetched.file;
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
  const Digest checksum = file->slab_checksum;
  ClaimVerdict v = CheckResidentClaim(span_claim, m, access_, checksum);
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
  out->bytes = fetched.bytes;
  // A whole slab carries the checksum just verified, so the tree inserting it need not hash it
  // again; a slice is a new object with its own (unknown) checksum.
  out->slab = from < pos ? std::make_shared<const KVSlab>(slab.Slice(pos - from, end - pos))
                         : internal::MakeVerifiedSlab(std::move(slab), checksum);
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
  const KVShape shape = cache.shape();
  // Reads the walk's next candidate on a helper thread (deferred to get() if no thread can start).
  const auto fetch_async = [&](size_t at, size_t from_index) {
    const std::span<const uint64_t> e(*ends);
    try {
      return std::async(std::launch::async, [this, &claim, tokens, e, shape, at, limit, from_index] {
        return Fetch(claim, tokens, e, shape, at, limit, from_index);
      });
    } catch (const std::system_error&) {
      return std::async(std::launch::deferred, [this, &claim, tokens, e, shape, at, limit, from_index] {
        return Fetch(claim, tokens, e, shape, at, limit, from_index);
      });
    }
  };
  size_t pos = cache.size();
  PageInFailure last = PageInFailure::kAbsent;
  std::string last_detail;
  Fetched f = pos < limit ? Fetch(claim, tokens, *ends, shape, pos, limit, 0) : Fetched{};
  while (pos < limit) {
    if (!f.found) {  // nothing (more) verifies at pos
      if (last == PageInFailure::kAbsent) {
        refused_[static_cast<int>(last)].fetch_add(1, std::memory_order_relaxed);
        last_detail = "no entry continues the context at token " + std::to_string(pos);
      }
      result.failure = last;
      result.detail = std::move(last_detail);
      break;
    }
    // Overlap: while this slab is verified (hashed, gated) and appended, read and decode the one
    // the walk tries next if this one is served: the first entry, furthest end first, that exists
    // past this one's end and starts at or before it. If this one is refused, that read is wasted
    // (the future is joined) and the walk goes on from this candidate.
    std::future<Fetched> ahead;
    if (f.file.has_value() && f.key.end < limit) ahead = fetch_async(f.key.end, 0);
    Candidate c;
    std::string detail;
    const size_t index = f.index;
    const PageInFailure v = Verify(claim, tokens, cache.shape(), pos, f, &c, &detail);
    bool advanced = false;
    if (v != PageInFailure::kNone) {
      refused_[static_cast<int>(v)].fetch_add(1, std::memory_order_relaxed);
      last = v;
      last_detail = std::move(detail);
    } else {
      const size_t n = c.slab->size();
      if (internal::KVCacheAccess::AppendShared(cache, std::move(c.slab)).ok()) {
        served_slabs_.fetch_add(1, std::memory_order_relaxed);
        paged_tokens_.fetch_add(n, std::memory_order_relaxed);
        paged_bytes_.fetch_add(c.bytes, std::memory_order_relaxed);
        result.paged_tokens += n;
        result.paged_bytes += c.bytes;
        pos += n;
        advanced = true;
      } else {
        last = PageInFailure::kMalformed;
        last_detail = "the slab does not fit the session cache";
      }
    }
    if (advanced) {
      last = PageInFailure::kAbsent;
      last_detail.clear();
      if (pos >= limit) break;
      f = ahead.valid() ? ahead.get() : Fetch(claim, tokens, *ends, shape, pos, limit, 0);
    } else {
      f = Fetch(claim, tokens, *ends, shape, pos, limit, index + 1);  // `ahead` is dropped (joined) here
    }
  }
  return result;
}

}  // namespace fak
