// RadixTree: cross-session prefix reuse of one model's KV, keyed on token-id runs.
//
// A compressed trie: each node owns the KV slab of its own edge only, so resident memory equals the
// unique tokens held (no prefix is stored twice). Lookup walks to the longest cached prefix,
// splitting an edge where the request diverges inside it (slicing a slab is exact), and hands out a
// session cache that reads the path's slabs in place (KVCache::AppendShared: nothing is copied, and
// a slab outlives its node while a session reads it); only the suffix is left to prefill. Insert
// adds what a finished request computed.
//
// Eviction: EvictToBudget trims under memory pressure by a pluggable policy (LRU, LFU, or
// deepest-tokens-first), never touching leased or pinned paths; EvictNode removes a subtree because
// policy says so (quarantine), whatever its recency or leases, and reports what it removed;
// EvictSource does the same for every node whose tokens came from a given source text.
//
// The manifest gate (architecture §6) guards every reuse: each node carries a KVManifest (binding
// tuple of its span, tenant, sharing), and a lookup serves a node only if the caller's claim gets a
// HIT from CheckResidentClaim — so a tree never serves KV across a model, tokenizer, regime or
// tenant boundary. Each tenant's tokens live in its own namespace below the declared public
// prefixes (AccessPolicy), which every tenant shares.
//
// Thread-safety: all methods may be called concurrently (one internal mutex; a lookup's session
// cache is set up, and an insert's new KV copied and hashed, outside it). Leases must not outlive
// the tree.
#ifndef FAK_SESSION_RADIX_TREE_H_
#define FAK_SESSION_RADIX_TREE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fak/core/digest.h"
#include "fak/core/export.h"
#include "fak/kv/kv_cache.h"
#include "fak/gate/resident_claim.h"
#include "fak/model/model.h"
#include "fak/session/source_span.h"
#include "fak/session/kv_pager.h"
#include "fak/session/spill_sink.h"
#include "fak/tokenizer/tokenizer.h"
#include "fak/core/status.h"

namespace fak {

enum class EvictionPolicy {
  kLru,           // least recently used leaf first (whole leaves)
  kLfu,           // least often hit leaf first, then least recent
  kDeepestFirst,  // trim the deepest tokens first, keeping shallow shared prefixes of every branch
};

struct RadixTreeOptions {
  // Resident KV bytes kept after each Insert; 0 = unbounded. Default: 0.
  size_t budget_bytes = 0;
  // Default: kLru.
  EvictionPolicy policy = EvictionPolicy::kLru;
  // Tenancy rules and public prefixes; copied at construction. Default: tenant-only spans.
  AccessPolicy access;
  // A lower KV tier's intake (not owned; must outlive the tree): every node budget eviction
  // removes is offered to it first (spill). Default: null (evicted KV is dropped).
  SpillSink* spill = nullptr;
  // Also offer every node Insert adds, and the shared prefix a divergence splits off an edge (a
  // prefix two contexts share, which another worker's tier lookup can then find), for hot prefixes
  // (write-through). Default: false.
  bool write_through = false;
};

inline constexpr std::string_view kDefaultTenant = "default";

struct RadixTreeStats {
  size_t unique_tokens = 0;   // tokens resident (each stored once)
  size_t resident_bytes = 0;  // bytes of the resident slabs
  size_t node_count = 0;      // excluding the root
  size_t lookups = 0, hits = 0, misses = 0;
  size_t hit_tokens = 0;        // tokens served from the tree
  size_t prefilled_tokens = 0;  // tokens lookups left to prefill
  size_t evicted_tokens = 0;
};

using NodeId = uint64_t;  // 0 is the root

class RadixTree;

// Keeps a node (and so its whole path) from budget eviction while a session is in flight.
class FAK_EXPORT Lease {
 public:
  Lease() = default;
  ~Lease();
  Lease(Lease&& other) noexcept;
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  NodeId node() const { return node_; }

 private:
  friend class RadixTree;
  Lease(RadixTree* tree, NodeId node) : tree_(tree), node_(node) {}
  void Release();
  RadixTree* tree_ = nullptr;
  NodeId node_ = 0;
};

struct LookupResult {
  KVCache cache;           // the longest cached prefix, read in place from the tree's slabs, with room
                           // reserved for the rest of the request
  size_t matched_tokens = 0;
  ClaimVerdict gate;       // HIT, or the verdict that stopped the walk (MISS{axis}, REFUSE, ...)
  NodeId node = 0;         // where the match ends (0 = root: a miss)
  Lease lease;             // held until the request is done
};

// Insert takes SourceSpans (source_span.h): where runs of an inserted context came from. The tree
// keeps, per node, the runs that overlap its edge, binds them into the node's manifest
// (source_digest) and evicts by source (EvictSource) when the text is denied later.

// What the gate would say about reusing a prefix, without reusing it (RadixTree::ProbeGate).
struct GateProbe {
  size_t resident_tokens = 0;  // the longest prefix held in the walked namespace
  size_t admitted_tokens = 0;  // of those, the prefix whose every node the gate admits for the claim
  ClaimVerdict verdict;        // HIT when all resident nodes are admitted, else the first non-HIT
};

struct EvictedSubtree {
  size_t n_nodes = 0, n_tokens = 0;
  std::vector<Digest> span_digests;  // one per removed node: sha256 of its edge's token ids
};

// One leaf's path as the texts it holds (RadixTree::HeldPaths), for cache-aware routing.
struct HeldPath {
  std::string tenant;           // the leaf's namespace ("" = the shared public prefixes)
  std::vector<Digest> sources;  // the texts along the path, in order
  std::vector<size_t> ends;     // tokens from the root through each text's last held token
};

class FAK_EXPORT RadixTree {
 public:
  // `model` and `tokenizer` must outlive the tree; every slab belongs to the model's KV shape, and
  // every node is bound to the regime (model, tokenizer, kernel tier...) current at construction.
  RadixTree(const Model& model, const Tokenizer& tokenizer, RadixTreeOptions options = {});
  ~RadixTree();
  RadixTree(const RadixTree&) = delete;
  RadixTree& operator=(const RadixTree&) = delete;

  // Longest cached prefix of `tokens` that the gate admits for `claim` (its binding's regime axes
  // and tenant; span axes are filled per node), capped at tokens.size() - 1 so one token is always
  // left to prefill (the caller needs its logits).
  LookupResult Lookup(const ResidentClaim& claim, std::span<const int32_t> tokens);
  // Lookup with this tree's own regime and kDefaultTenant.
  LookupResult Lookup(std::span<const int32_t> tokens);
  // Lookup, then — with a pager (SetPager), when the tree holds less than all but the last token —
  // the rest of the prefix from the lower tier: every slab verified by the gate for `claim`,
  // inserted as radix nodes recording `sources` (so the next lookup, of any request of the tenant,
  // is a HIT) and appended to the result's cache, one token short of `tokens` when the tier held
  // all of it (the caller prefills that one for its logits). Nothing unverified is appended.
  // `paged` (may be null) says what the tier supplied or why it stopped. Blocks on the tier's
  // reads and two SHA-256 passes per slab.
  LookupResult LookupOrPageIn(const ResidentClaim& claim, std::span<const int32_t> tokens,
                              std::span<const SourceSpan> sources, PagedPrefix* paged);
  // The lower tier LookupOrPageIn pages from (not owned; thread-safe; must outlive the tree); null
  // = none. Set it before the tree is shared. The way out is RadixTreeOptions::spill.
  void SetPager(KVPager* pager);
  bool pages_in() const;
  // The claim this tree's own regime makes for `tenant`.
  ResidentClaim ClaimFor(std::string tenant) const;
  // The gate's verdict on each node of the longest prefix of `tokens` held in `holder`'s view,
  // judged for `claim` (which may name another tenant or another regime than the holder's): what a
  // Lookup by `claim` of the holder's context would be told, axis by axis (an edge the match ends
  // inside is judged whole). Read-only: no split, no lease, no recency, no statistics.
  GateProbe ProbeGate(const ResidentClaim& claim, std::span<const int32_t> tokens, std::string_view holder) const;
  // Length of the longest cached prefix, without splitting, copying or touching recency.
  size_t MatchLength(std::span<const int32_t> tokens, std::string_view tenant = kDefaultTenant) const;
  // Adds `tokens` (the first tokens.size() tokens of `cache`, which must be this model's) to
  // `tenant`'s namespace (the public-prefix part to the shared one), then trims to the budget.
  // InvalidArgument when the cache does not hold those tokens or the tenant name is invalid.
  // `sources` says which source texts runs of `tokens` came from; each node the context passes
  // through (new or already cached) records the runs overlapping its edge.
  Status Insert(std::string_view tenant, std::span<const int32_t> tokens, const KVCache& cache,
                std::span<const SourceSpan> sources = {});
  Status Insert(std::span<const int32_t> tokens, const KVCache& cache) { return Insert(kDefaultTenant, tokens, cache); }

  // The node at the end of exactly `tokens` in `tenant`'s view (splitting an edge if needed);
  // NotFound if absent.
  Result<NodeId> FindNode(std::span<const int32_t> tokens, std::string_view tenant = kDefaultTenant);
  // Removes `node` and its subtree regardless of recency and leases; NotFound if absent,
  // InvalidArgument for the root.
  Result<EvictedSubtree> EvictNode(NodeId node);
  // Removes the tokens from `source` (as Insert was told) and everything after them — the rest of
  // their edge and its subtree, whose KV attended to them — regardless of recency, leases and pins:
  // a denied text's KV is neither served nor held. An edge is split where the source begins, so the
  // tokens before it stay. Nothing to remove is not an error. With `tenant`, only what that tenant
  // can reach: its own nodes and the shared public prefixes (another tenant's stay).
  EvictedSubtree EvictSource(const Digest& source, std::optional<std::string_view> tenant = std::nullopt);
  // The distinct source digests the resident nodes came from (for a sweep against a denylist).
  std::vector<Digest> Sources() const;
  // Every leaf's path as the texts it holds from the root, in order. A hint for routing (the gate
  // still decides every reuse): the last text of a leaf trimmed by eviction may be held in part.
  std::vector<HeldPath> HeldPaths() const;
  // Offers every whole node on the path of `tokens` in `tenant`'s view to `sink` (root first), as
  // eviction would: a checkpoint of a conversation's KV to a lower tier, e.g. before a shutdown.
  // The number of nodes offered. Nothing is split or touched.
  size_t OfferPath(std::span<const int32_t> tokens, std::string_view tenant, SpillSink& sink) const;
  // Trims unleased, unpinned tokens by the policy until resident bytes <= budget_bytes.
  void EvictToBudget(size_t budget_bytes);
  // A pinned node (and so its path) is never evicted under budget pressure.
  Status SetPinned(NodeId node, bool pinned);

  RadixTreeStats Stats() const;
  // Verdict counts by outcome and miss axis, token-level hit rates.
  GateStats GateStatistics() const;
  // Re-hashes every slab against its manifest's integrity checksum; the ids of nodes that differ.
  std::vector<NodeId> VerifyIntegrity() const;
  const KVManifest* ManifestOf(NodeId node) const;
  // The tenancy rules the tree serves under (a lower tier gates page-ins by the same rules).
  const AccessPolicy& access_policy() const;  // null if absent; valid until the next mutation
  // Bytes of one token's KV (K, Kraw, V and its id): resident_bytes / unique_tokens when exact.
  size_t BytesPerToken() const;
  // Whether what it evicts is offered to a lower tier (RadixTreeOptions::spill).
  bool spills() const;

 private:
  friend class Lease;
  struct Impl;
  void ReleaseLease(NodeId node);
  std::unique_ptr<Impl> impl_;
};

// Cache-aware scheduling (SGLang's longest-prefix-match order): the index of the waiting request
// with the longest cached prefix `tenant` may reuse right now, the earliest on ties; call it again
// after each request runs, since running one changes what the others match. `waiting` must not be
// empty; every request in it belongs to `tenant` (order each tenant's line on its own).
FAK_EXPORT size_t NextCacheAware(const RadixTree& tree, const std::vector<std::span<const int32_t>>& waiting,
                      std::string_view tenant = kDefaultTenant);

}  // namespace fak

#endif  // FAK_SESSION_RADIX_TREE_H_
