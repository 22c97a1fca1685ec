// RadixTree: the trie, its splits, slab assembly, leases and eviction.
#include "fak/session/radix_tree.h"
#include "src/core/dcheck.h"
#include "src/kv/kv_cache_access.h"
#include "src/session/verified_slab.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>

namespace fak {
namespace {

// A run of new tokens ready to hang under the tree: its slab and checksum, made outside the lock.
struct PreparedEdge {
  size_t end = 0;  // tokens from the root through this edge
  std::shared_ptr<const KVSlab> slab;
  Digest checksum;
};

// The edges Insert adds for tokens [from, cache's end): the public-prefix part (below public_len)
// and the rest, each copied out of the cache once and hashed.
// A slab the cache reads in place that starts exactly at `from` and ends by `stop` (a page-in from a
// lower tier appends whole slabs): the tree can hold that very slab instead of a copy.
std::shared_ptr<const KVSlab> SharedSlabAt(const KVCache& cache, size_t from, size_t stop) {
  size_t at = 0;
  for (const std::shared_ptr<const KVSlab>& s : cache.shared_slabs()) {
    if (at == from && s->start_position == from && from + s->size() <= stop && s->shape == cache.shape()) return s;
    at += s->size();
    if (at > from) break;
  }
  return nullptr;
}

std::vector<PreparedEdge> PrepareEdges(const KVCache& cache, size_t from, size_t end, size_t public_len) {
  std::vector<PreparedEdge> edges;
  while (from < end) {
    size_t stop = from < public_len ? std::min(public_len, end) : end;
    std::shared_ptr<const KVSlab> slab = SharedSlabAt(cache, from, stop);
    if (slab != nullptr) {
      stop = from + slab->size();
    } else {
      Result<KVSlab> copy = cache.CopySpan(from, stop - from);
      FAK_DCHECK(copy.has_value());  // in range: checked by Insert
      slab = std::make_shared<const KVSlab>(*std::move(copy));
    }
    // A slab the gate verified on page-in keeps the checksum it was verified with: hashed once.
    const Digest* verified = internal::VerifiedChecksumOf(slab);
    edges.push_back({stop, slab, verified != nullptr ? *verified : KVSlabChecksum(*slab)});
    from = stop;
  }
  return edges;
}

// A split of one edge made ready outside the lock: the halves of `slab` (the edge as it was seen)
// after k tokens, each with its checksum. Split uses it only if the edge still holds that slab.
struct PreparedSplit {
  std::shared_ptr<const KVSlab> slab;
  size_t k = 0;
  std::shared_ptr<const KVSlab> upper, lower;
  Digest upper_checksum, lower_checksum;

  void Prepare() {
    if (slab == nullptr) return;
    upper = std::make_shared<const KVSlab>(slab->Slice(0, k));
    lower = std::make_shared<const KVSlab>(slab->Slice(k, slab->size() - k));
    upper_checksum = KVSlabChecksum(*upper);
    lower_checksum = KVSlabChecksum(*lower);
  }
};

}  // namespace

struct RadixTree::Impl {
  struct Node {
    NodeId id = 0;
    Node* parent = nullptr;
    std::shared_ptr<const KVSlab> slab;  // the edge's tokens and KV; null at the root
    // Keyed by (namespace, first token): "" for the shared public prefixes, else the tenant.
    std::map<std::pair<std::string, int32_t>, std::unique_ptr<Node>> children;
    std::string ns;
    KVManifest manifest;  // the span's binding, tenant and sharing; what the gate checks
    size_t depth_end = 0;  // tokens from the root through this edge
    uint64_t last_access = 0, hits = 0;
    int leases = 0;
    bool pinned = false;
    std::vector<SourceSpan> sources;  // the inserted runs overlapping this edge, clipped to it

    // Records the runs of `spans` that overlap [from, end) of this edge, clipped, once each.
    void AddSources(std::span<const SourceSpan> spans) {
      for (const SourceSpan& s : spans) {
        const size_t lo = std::max(s.from, from()), hi = std::min(s.from + s.n_tokens, depth_end);
        if (lo >= hi) continue;
        const SourceSpan clipped{lo, hi - lo, s.source};
        if (std::find(sources.begin(), sources.end(), clipped) == sources.end()) sources.push_back(clipped);
      }
    }
    bool HasSource(const Digest& d) const {
      return std::any_of(sources.begin(), sources.end(), [&](const SourceSpan& s) { return s.source == d; });
    }

    size_t edge_size() const { return slab ? slab->size() : 0; }
    size_t from() const { return depth_end - edge_size(); }
    std::pair<std::string, int32_t> key() const { return {ns, slab->tokens[0]}; }
    bool Evictable() const { return children.empty() && leases == 0 && !pinned && parent != nullptr; }
  };

  Impl(const Model& m, const Tokenizer& t, RadixTreeOptions o) : model(m), options(std::move(o)), regime(RegimeBinding(m, t)) {
    const ModelConfig& c = m.config();
    bytes_per_token = 3 * c.n_layers * c.n_kv_heads * c.head_dim * KVDtypeBytes(m.kv_dtype()) + sizeof(int32_t);
    by_id[0] = &root;
  }

  const Model& model;
  const RadixTreeOptions options;
  KVPager* pager = nullptr;  // SetPager: before the tree is shared
  const BindingTuple regime;
  GateCounters gate_counters;  // thread-safe on its own
  size_t bytes_per_token = 0;
  mutable std::mutex mu;
  // Everything below is GUARDED_BY(mu).
  Node root;
  std::unordered_map<NodeId, Node*> by_id;
  NodeId next_id = 1;
  uint64_t tick = 0;
  RadixTreeStats stats;

  // Binds `n`'s span, whose slab hashes to `checksum`, and the sources recorded over its edge;
  // `context` holds the tokens from the root through at least its end.
  void Bind(Node* n, std::span<const int32_t> context, std::string_view tenant, Sharing sharing, const Digest& checksum) {
    n->manifest = KVManifest{};  // invalid unless rebuilt below: the gate then says CORRUPT (fail closed)
    Result<BindingTuple> b = BindSpan(regime, context, n->from(), n->edge_size());
    if (!b.has_value()) return;
    b->integrity_checksum = checksum;
    const Digest source = SourceSetDigest(n->sources, n->from(), n->edge_size(), b->span_digest);
    if (Result<KVManifest> m = MakeManifest(*b, source, std::string(tenant), sharing)) n->manifest = std::move(*m);
  }

  // Re-binds the source digest after runs were added to an already-bound node (same span and bytes).
  void RebindSources(Node* n) {
    const Digest source = SourceSetDigest(n->sources, n->from(), n->edge_size(), n->manifest.binding.span_digest);
    if (source == n->manifest.source_digest) return;
    const KVManifest old = n->manifest;
    n->manifest = KVManifest{};
    if (Result<KVManifest> m = MakeManifest(old.binding, source, old.tenant, old.sharing)) n->manifest = std::move(*m);
  }

  // Hands `n` to the spill sink, if any (under the lock: the sink only queues).
  void Offer(const Node* n, SpillReason reason) const {
    if (options.spill != nullptr && n->slab != nullptr) options.spill->Offer(SpillItem{n->manifest, n->slab, n->sources}, reason);
  }

  // The tokens from the root through the end of `n`'s edge.
  static std::vector<int32_t> ContextThrough(const Node* n) {
    std::vector<const Node*> up;
    for (const Node* a = n; a->parent != nullptr; a = a->parent) up.push_back(a);
    std::vector<int32_t> context;
    context.reserve(n->depth_end);
    for (auto it = up.rbegin(); it != up.rend(); ++it) {
      const std::vector<int32_t>& edge = (*it)->slab->tokens;
      context.insert(context.end(), edge.begin(), edge.end());
    }
    return context;
  }

  // Binds `n` anew over its current slab, keeping its source, tenant and sharing.
  void Rebind(Node* n) {
    const KVManifest old = n->manifest;
    Bind(n, ContextThrough(n), old.tenant, old.sharing, KVSlabChecksum(*n->slab));
  }

  // Splits `node`'s edge after `k` tokens; returns the new upper node (which takes its place).
  // `context` holds the tokens from the root through the split point. The halves and their
  // checksums come from `ready` when it was made for this very edge, else they are made here.
  Node* Split(Node* node, size_t k, std::span<const int32_t> context, const PreparedSplit* ready) {
    FAK_DCHECK(k > 0 && k < node->edge_size());  // both halves keep at least one token
    PreparedSplit made;
    if (ready == nullptr || ready->slab != node->slab || ready->k != k) {
      made.slab = node->slab;
      made.k = k;
      made.Prepare();
      ready = &made;
    }
    auto upper = std::make_unique<Node>();
    upper->id = next_id++;
    upper->parent = node->parent;
    upper->ns = node->ns;
    upper->slab = ready->upper;
    upper->depth_end = node->from() + k;
    upper->last_access = node->last_access;
    upper->hits = node->hits;
    auto& slot = node->parent->children[node->key()];
    std::unique_ptr<Node> lower = std::move(slot);
    const std::vector<int32_t> old_edge = lower->slab->tokens;
    lower->slab = ready->lower;
    lower->parent = upper.get();
    const KVManifest old = lower->manifest;
    std::vector<int32_t> full(context.begin(), context.begin() + upper->depth_end);
    full.insert(full.end(), old_edge.begin() + k, old_edge.end());
    const std::vector<SourceSpan> sources = std::move(lower->sources);
    lower->sources.clear();
    upper->AddSources(sources);  // each half keeps the runs over its own tokens
    lower->AddSources(sources);
    Bind(upper.get(), full, old.tenant, old.sharing, ready->upper_checksum);
    Bind(lower.get(), full, old.tenant, old.sharing, ready->lower_checksum);
    Node* up = upper.get();
    up->children[lower->key()] = std::move(lower);
    by_id[up->id] = up;
    slot = std::move(upper);
    ++stats.node_count;  // slicing conserves tokens and bytes exactly
    return up;
  }

  struct WalkEnd {
    Node* node;   // the deepest node whose edge matched whole (after the split, when one was made)
    size_t pos;   // tokens matched
    PreparedSplit split_point;  // without a split: the edge the match ends inside, and where (slab null: none)
  };

  // Walks `tokens[0, limit)` in `tenant`'s view: the shared namespace below the public prefix
  // length, the tenant's own beyond. Splits an edge at a mid-edge divergence when `split` (with the
  // halves in `ready` when they were made for that edge), else reports where it would.
  WalkEnd Walk(std::span<const int32_t> tokens, size_t limit, std::string_view tenant, bool split,
               const PreparedSplit* ready = nullptr) {
    const size_t public_len = options.access.PublicPrefixLength(tokens);
    WalkEnd end{&root, 0, {}};
    while (end.pos < limit) {
      auto it = end.node->children.find({end.pos < public_len ? std::string() : std::string(tenant), tokens[end.pos]});
      if (it == end.node->children.end()) break;
      Node* c = it->second.get();
      const std::vector<int32_t>& edge = c->slab->tokens;
      size_t m = 0;
      while (m < edge.size() && end.pos + m < limit && edge[m] == tokens[end.pos + m]) ++m;
      end.pos += m;
      if (m < edge.size()) {
        if (split) {
          end.node = Split(c, m, tokens, ready);
          // A divergence (not the walk's limit) is a prefix two contexts share — a system prompt
          // many conversations open with. Written through, it gets a tier entry of its own, ending
          // here, so another worker pages it in; the entry of the whole edge ends past it, where
          // only a context that continues the same way can find it.
          if (options.write_through && end.pos < limit) Offer(end.node, SpillReason::kWriteThrough);
        } else {
          end.split_point.slab = c->slab;
          end.split_point.k = m;
        }
        break;
      }
      end.node = c;
    }
    return end;
  }

  void Touch(Node* n) {
    ++tick;
    for (; n != nullptr; n = n->parent) n->last_access = tick;
  }

  void RemoveSubtree(Node* n, EvictedSubtree* out) {
    for (auto& [tok, child] : n->children) RemoveSubtree(child.get(), out);
    out->n_nodes += 1;
    out->n_tokens += n->edge_size();
    out->span_digests.push_back(Digest::Of(n->slab->tokens.data(), n->slab->tokens.size() * sizeof(int32_t)));
    stats.unique_tokens -= n->edge_size();
    stats.resident_bytes -= n->slab->size_bytes();
    stats.evicted_tokens += n->edge_size();
    --stats.node_count;
    by_id.erase(n->id);
  }

  EvictedSubtree Remove(Node* n) {
    EvictedSubtree out;
    RemoveSubtree(n, &out);
    n->parent->children.erase(n->key());  // destroys n
    return out;
  }

  bool Prefer(const Node* a, const Node* b) const {  // a is a better victim than b
    switch (options.policy) {
      case EvictionPolicy::kLru: return a->last_access < b->last_access;
      case EvictionPolicy::kLfu: return a->hits != b->hits ? a->hits < b->hits : a->last_access < b->last_access;
      case EvictionPolicy::kDeepestFirst:
        return a->depth_end != b->depth_end ? a->depth_end > b->depth_end : a->last_access < b->last_access;
    }
    return false;
  }

  Node* PickVictim() const {
    Node* best = nullptr;
    for (auto& [id, n] : by_id)
      if (n->Evictable() && (best == nullptr || Prefer(n, best))) best = n;
    return best;
  }

  void EvictToBudget(size_t budget) {
    while (stats.resident_bytes > budget) {
      Node* victim = PickVictim();
      if (victim == nullptr) return;  // everything left is leased or pinned
      const size_t excess_tokens = (stats.resident_bytes - budget + bytes_per_token - 1) / bytes_per_token;
      if (options.policy == EvictionPolicy::kDeepestFirst && excess_tokens < victim->edge_size()) {
        // Trim the tail of the deepest edge only as far as needed.
        const size_t keep = victim->edge_size() - excess_tokens;
        stats.resident_bytes -= victim->slab->size_bytes();
        victim->slab = std::make_shared<const KVSlab>(victim->slab->Slice(0, keep));
        stats.resident_bytes += victim->slab->size_bytes();
        victim->depth_end -= excess_tokens;
        const std::vector<SourceSpan> sources = std::move(victim->sources);
        victim->sources.clear();
        victim->AddSources(sources);  // drop the runs over the trimmed tail
        stats.unique_tokens -= excess_tokens;
        stats.evicted_tokens += excess_tokens;
        Rebind(victim);  // the manifest vouched for the untrimmed span and bytes
        continue;
      }
      Offer(victim, SpillReason::kEvicted);
      Remove(victim);
    }
  }
};

Lease::~Lease() { Release(); }
Lease::Lease(Lease&& o) noexcept : tree_(std::exchange(o.tree_, nullptr)), node_(std::exchange(o.node_, 0)) {}
Lease& Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    Release();
    tree_ = std::exchange(o.tree_, nullptr);
    node_ = std::exchange(o.node_, 0);
  }
  return *this;
}
void Lease::Release() {
  if (tree_ != nullptr) tree_->ReleaseLease(node_);
  tree_ = nullptr;
}

RadixTree::RadixTree(const Model& model, const Tokenizer& tokenizer, RadixTreeOptions options)
    : impl_(std::make_unique<Impl>(model, tokenizer, std::move(options))) {}
RadixTree::~RadixTree() = default;

void RadixTree::ReleaseLease(NodeId node) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->by_id.find(node);
  if (it != impl_->by_id.end() && it->second->leases > 0) --it->second->leases;  // gone if policy-evicted
}

ResidentClaim RadixTree::ClaimFor(std::string tenant) const { return ResidentClaim{impl_->regime, std::move(tenant)}; }

LookupResult RadixTree::Lookup(std::span<const int32_t> tokens) { return Lookup(ClaimFor(std::string(kDefaultTenant)), tokens); }

LookupResult RadixTree::Lookup(const ResidentClaim& claim, std::span<const int32_t> tokens) {
  std::vector<std::shared_ptr<const KVSlab>> path;
  LookupResult out{.cache = impl_->model.NewCache(), .gate = ClaimVerdict::Hit(), .lease = {}};
  const size_t limit = tokens.empty() ? 0 : tokens.size() - 1;
  PreparedSplit split;  // a mid-edge match splits that edge: its halves are copied and hashed unlocked
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    split = impl_->Walk(tokens, limit, claim.tenant, /*split=*/false).split_point;
  }
  split.Prepare();
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    Impl::Node* end = impl_->Walk(tokens, limit, claim.tenant, /*split=*/true, &split).node;
    std::vector<Impl::Node*> nodes;
    for (Impl::Node* n = end; n->parent != nullptr; n = n->parent) nodes.push_back(n);
    // The gate, top down: serve nodes while every one of them is a HIT for this claim.
    Impl::Node* served = &impl_->root;
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      Impl::Node* n = *it;
      ResidentClaim node_claim{claim.binding, claim.tenant};
      Result<BindingTuple> b = BindSpan(claim.binding, tokens, n->from(), n->edge_size());
      if (b.has_value()) node_claim.binding = *b;
      node_claim.binding.integrity_checksum = Digest{};  // bytes are checked by VerifyIntegrity
      ClaimVerdict v = CheckResidentClaim(node_claim, n->manifest, impl_->options.access);
      impl_->gate_counters.Record(v, n->edge_size());
      if (!v.hit()) {
        out.gate = std::move(v);
        break;
      }
      path.push_back(n->slab);
      served = n;
    }
    RadixTreeStats& s = impl_->stats;
    out.matched_tokens = served->depth_end;
    ++s.lookups;
    (out.matched_tokens > 0 ? s.hits : s.misses) += 1;
    s.hit_tokens += out.matched_tokens;
    s.prefilled_tokens += tokens.size() - out.matched_tokens;
    impl_->gate_counters.RecordLookup(tokens.size(), out.matched_tokens);
    if (served != &impl_->root) {
      ++served->hits;
      ++served->leases;
      impl_->Touch(served);
      out.lease = Lease(this, served->id);
    }
    out.node = served->id;
  }
  // Assemble outside the lock: slabs are immutable, and the session reads them in place.
  // Room for the whole request, so prefilling the suffix does not regrow (copy) the assembled prefix;
  // the matched part alone always fits, since it was prefilled once.
  if (!out.cache.Reserve(tokens.size()).ok()) (void)out.cache.Reserve(out.matched_tokens);
  for (auto& slab : path) (void)internal::KVCacheAccess::AppendShared(out.cache, std::move(slab));  // read in place, not copied
  return out;
}

GateProbe RadixTree::ProbeGate(const ResidentClaim& claim, std::span<const int32_t> tokens,
                               std::string_view holder) const {
  GateProbe out{.verdict = ClaimVerdict::Hit()};
  std::lock_guard<std::mutex> lock(impl_->mu);
  const Impl::WalkEnd end = const_cast<Impl*>(impl_.get())->Walk(tokens, tokens.size(), holder, /*split=*/false);
  std::vector<const Impl::Node*> nodes;
  for (const Impl::Node* n = end.node; n->parent != nullptr; n = n->parent) nodes.push_back(n);
  std::reverse(nodes.begin(), nodes.end());
  // The edge the match ends inside is judged whole, as resident (the half a Lookup would split off
  // carries the same regime and tenant); its own tokens bind the span axes.
  if (end.split_point.slab != nullptr) {
    for (const auto& [key, child] : end.node->children)
      if (child->slab == end.split_point.slab) nodes.push_back(child.get());
  }
  out.resident_tokens = end.pos;
  for (const Impl::Node* n : nodes) {
    std::vector<int32_t> context(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(n->from()));
    context.insert(context.end(), n->slab->tokens.begin(), n->slab->tokens.end());
    ResidentClaim node_claim{claim.binding, claim.tenant};
    Result<BindingTuple> b = BindSpan(claim.binding, context, n->from(), n->edge_size());
    if (b.has_value()) node_claim.binding = *b;
    node_claim.binding.integrity_checksum = Digest{};  // as Lookup: the bytes are VerifyIntegrity's
    ClaimVerdict v = CheckResidentClaim(node_claim, n->manifest, impl_->options.access);
    if (!v.hit()) {
      out.verdict = std::move(v);
      break;
    }
    out.admitted_tokens = std::min(n->depth_end, end.pos);
  }
  return out;
}

size_t RadixTree::MatchLength(std::span<const int32_t> tokens, std::string_view tenant) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return const_cast<Impl*>(impl_.get())->Walk(tokens, tokens.size(), tenant, /*split=*/false).pos;
}

Status RadixTree::Insert(std::string_view tenant, std::span<const int32_t> tokens, const KVCache& cache,
                         std::span<const SourceSpan> sources) {
  if (!cache.SameBinding(impl_->model.NewCache())) return InvalidArgument("RadixTree::Insert: the cache belongs to another model");
  if (tokens.size() > cache.size() || !std::equal(tokens.begin(), tokens.end(), cache.tokens().begin())) {
    return InvalidArgument("RadixTree::Insert: the cache does not hold these " + std::to_string(tokens.size()) + " tokens");
  }
  if (!IsValidTenant(tenant)) return InvalidArgument("RadixTree::Insert: invalid tenant name '" + std::string(tenant) + "'");
  // Copying and hashing the new tokens' KV is the costly part, so it happens outside the lock, for
  // what the tree lacked a moment ago; if another thread changed that meanwhile, it is redone.
  // So is splitting the edge the match ends inside.
  const size_t public_len = impl_->options.access.PublicPrefixLength(tokens);
  Impl::WalkEnd seen;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    seen = impl_->Walk(tokens, tokens.size(), tenant, /*split=*/false);
  }
  if (seen.pos < tokens.size() && cache.held_from() > seen.pos) {
    return FailedPrecondition("RadixTree::Insert: the cache's sliding-window layers no longer hold token " +
                              std::to_string(seen.pos) + " (a windowed cache keeps only [" +
                              std::to_string(cache.held_from()) + ", " + std::to_string(cache.size()) + "))");
  }
  seen.split_point.Prepare();
  std::vector<PreparedEdge> edges = PrepareEdges(cache, seen.pos, tokens.size(), public_len);
  std::lock_guard<std::mutex> lock(impl_->mu);
  const Impl::WalkEnd end = impl_->Walk(tokens, tokens.size(), tenant, /*split=*/true, &seen.split_point);
  Impl::Node* node = end.node;
  size_t matched = end.pos;
  for (Impl::Node* n = node; n->parent != nullptr; n = n->parent) {  // already cached
    n->AddSources(sources);
    impl_->RebindSources(n);
  }
  if (matched != seen.pos) edges = PrepareEdges(cache, matched, tokens.size(), public_len);
  for (PreparedEdge& edge : edges) {
    // The public part of a new run goes to the shared namespace, the rest to the tenant's own.
    const bool is_public = matched < public_len;
    auto leaf = std::make_unique<Impl::Node>();
    leaf->id = impl_->next_id++;
    leaf->parent = node;
    leaf->ns = is_public ? std::string() : std::string(tenant);
    leaf->slab = std::move(edge.slab);
    leaf->depth_end = edge.end;
    leaf->AddSources(sources);
    impl_->Bind(leaf.get(), tokens, tenant, is_public ? Sharing::kPublicPrefix : Sharing::kTenantOnly, edge.checksum);
    if (impl_->options.write_through) impl_->Offer(leaf.get(), SpillReason::kWriteThrough);
    impl_->by_id[leaf->id] = leaf.get();
    impl_->stats.unique_tokens += leaf->edge_size();
    impl_->stats.resident_bytes += leaf->slab->size_bytes();
    ++impl_->stats.node_count;
    node = leaf.get();
    node->parent->children[node->key()] = std::move(leaf);
    matched = edge.end;
  }
  impl_->Touch(node);
  if (impl_->options.budget_bytes > 0) impl_->EvictToBudget(impl_->options.budget_bytes);
  return Status::Ok();
}

Result<NodeId> RadixTree::FindNode(std::span<const int32_t> tokens, std::string_view tenant) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const Impl::WalkEnd end = impl_->Walk(tokens, tokens.size(), tenant, /*split=*/true);
  if (end.pos != tokens.size()) return NotFound("RadixTree::FindNode: only " + std::to_string(end.pos) + " of " +
                                                std::to_string(tokens.size()) + " tokens are cached");
  return end.node->id;
}

Result<EvictedSubtree> RadixTree::EvictNode(NodeId id) {
  if (id == 0) return InvalidArgument("RadixTree::EvictNode: the root cannot be evicted");
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->by_id.find(id);
  if (it == impl_->by_id.end()) return NotFound("RadixTree::EvictNode: no node " + std::to_string(id));
  return impl_->Remove(it->second);
}

EvictedSubtree RadixTree::EvictSource(const Digest& source, std::optional<std::string_view> tenant) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<NodeId> hit;
  for (const auto& [id, n] : impl_->by_id) {
    if (tenant && !n->ns.empty() && n->ns != *tenant) continue;
    if (n->HasSource(source)) hit.push_back(id);
  }
  EvictedSubtree out;
  for (NodeId id : hit) {
    auto it = impl_->by_id.find(id);
    if (it == impl_->by_id.end()) continue;  // gone with an ancestor's subtree
    Impl::Node* n = it->second;
    // An edge often holds several messages: keep the tokens before the source's first one (their
    // KV never attended to it) by splitting there; `n` stays the lower half.
    size_t first = n->depth_end;
    for (const SourceSpan& s : n->sources) {
      if (s.source == source) first = std::min(first, s.from);
    }
    if (first > n->from()) impl_->Split(n, first - n->from(), Impl::ContextThrough(n), nullptr);
    const EvictedSubtree removed = impl_->Remove(n);
    out.n_nodes += removed.n_nodes;
    out.n_tokens += removed.n_tokens;
    out.span_digests.insert(out.span_digests.end(), removed.span_digests.begin(), removed.span_digests.end());
  }
  return out;
}

std::vector<Digest> RadixTree::Sources() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<Digest> out;
  for (const auto& [id, n] : impl_->by_id) {
    for (const SourceSpan& s : n->sources) out.push_back(s.source);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<HeldPath> RadixTree::HeldPaths() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<HeldPath> out;
  for (const auto& [id, leaf] : impl_->by_id) {
    if (!leaf->children.empty() || leaf->parent == nullptr) continue;
    std::vector<const Impl::Node*> path;
    for (const Impl::Node* n = leaf; n->parent != nullptr; n = n->parent) path.push_back(n);
    HeldPath held{leaf->ns, {}, {}};
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
      std::vector<SourceSpan> runs = (*it)->sources;
      std::sort(runs.begin(), runs.end(), [](const SourceSpan& a, const SourceSpan& b) { return a.from < b.from; });
      for (const SourceSpan& r : runs) {
        // A text split over edges continues its entry; a new one starts a new entry.
        if (!held.sources.empty() && held.sources.back() == r.source && held.ends.back() == r.from) {
          held.ends.back() = r.from + r.n_tokens;
        } else {
          held.sources.push_back(r.source);
          held.ends.push_back(r.from + r.n_tokens);
        }
      }
    }
    if (!held.sources.empty()) out.push_back(std::move(held));
  }
  return out;
}

size_t RadixTree::OfferPath(std::span<const int32_t> tokens, std::string_view tenant, SpillSink& sink) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const Impl::WalkEnd end = const_cast<Impl*>(impl_.get())->Walk(tokens, tokens.size(), tenant, /*split=*/false);
  std::vector<const Impl::Node*> path;
  for (const Impl::Node* n = end.node; n->parent != nullptr; n = n->parent) path.push_back(n);
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    sink.Offer(SpillItem{(*it)->manifest, (*it)->slab, (*it)->sources}, SpillReason::kWriteThrough);
  }
  return path.size();
}

void RadixTree::EvictToBudget(size_t budget_bytes) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->EvictToBudget(budget_bytes);
}

Status RadixTree::SetPinned(NodeId id, bool pinned) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->by_id.find(id);
  if (it == impl_->by_id.end() || id == 0) return NotFound("RadixTree::SetPinned: no node " + std::to_string(id));
  it->second->pinned = pinned;
  return Status::Ok();
}

RadixTreeStats RadixTree::Stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

size_t RadixTree::BytesPerToken() const { return impl_->bytes_per_token; }

GateStats RadixTree::GateStatistics() const { return impl_->gate_counters.Snapshot(); }

std::vector<NodeId> RadixTree::VerifyIntegrity() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<NodeId> bad;
  for (const auto& [id, n] : impl_->by_id)
    if (n->slab && KVSlabChecksum(*n->slab) != n->manifest.binding.integrity_checksum) bad.push_back(id);
  std::sort(bad.begin(), bad.end());
  return bad;
}

const KVManifest* RadixTree::ManifestOf(NodeId node) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->by_id.find(node);
  return it == impl_->by_id.end() || node == 0 ? nullptr : &it->second->manifest;
}

const AccessPolicy& RadixTree::access_policy() const { return impl_->options.access; }
bool RadixTree::spills() const { return impl_->options.spill != nullptr; }

void RadixTree::SetPager(KVPager* pager) { impl_->pager = pager; }
bool RadixTree::pages_in() const { return impl_->pager != nullptr; }

LookupResult RadixTree::LookupOrPageIn(const ResidentClaim& claim, std::span<const int32_t> tokens,
                                       std::span<const SourceSpan> sources, PagedPrefix* paged) {
  LookupResult lookup = Lookup(claim, tokens);
  PagedPrefix out;
  const size_t n = tokens.size();
  if (impl_->pager != nullptr && lookup.gate.outcome != ClaimOutcome::kRefuse && lookup.matched_tokens + 1 < n) {
    out.asked = true;
    const size_t resident = lookup.cache.size();
    // Every slab the pager appends passed the gate (axes, checksums, denylist, tenancy).
    PageInResult r = impl_->pager->PageIn(claim, tokens, n, lookup.cache);
    out.failure = r.failure;
    out.detail = std::move(r.detail);
    if (lookup.cache.size() > resident) {
      out.paged_tokens = lookup.cache.size() - resident;
      out.inserted = Insert(claim.tenant, tokens.first(lookup.cache.size()), lookup.cache, sources);
      // The last token is prefilled by the caller, which needs its logits; truncating is exact.
      if (lookup.cache.size() == n) {
        if (Status truncated = lookup.cache.Truncate(n - 1); !truncated.ok()) {
          // Cannot happen for n - 1 < size; if it did, serve nothing paged rather than a wrong length.
          (void)lookup.cache.Truncate(resident);
          out.paged_tokens = 0;
          out.inserted = truncated;
        }
      }
      lookup.matched_tokens = lookup.cache.size();
    }
  }
  if (paged != nullptr) *paged = std::move(out);
  return lookup;
}

size_t NextCacheAware(const RadixTree& tree, const std::vector<std::span<const int32_t>>& waiting,
                      std::string_view tenant) {
  size_t best = 0, best_len = 0;
  for (size_t i = 0; i < waiting.size(); ++i) {
    size_t len = tree.MatchLength(waiting[i], tenant);
    if (len > best_len) best = i, best_len = len;
  }
  return best;
}

}  // namespace fak
