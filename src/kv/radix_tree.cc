// RadixTree: the trie, its splits, slab assembly, leases and eviction.
#include "fak/radix_tree.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>

namespace fak {

struct RadixTree::Impl {
  struct Node {
    NodeId id = 0;
    Node* parent = nullptr;
    std::shared_ptr<const KVSlab> slab;  // the edge's tokens and KV; null at the root
    std::map<int32_t, std::unique_ptr<Node>> children;  // keyed by the child's first token
    size_t depth_end = 0;  // tokens from the root through this edge
    uint64_t last_access = 0, hits = 0;
    int leases = 0;
    bool pinned = false;

    size_t edge_size() const { return slab ? slab->size() : 0; }
    bool Evictable() const { return children.empty() && leases == 0 && !pinned && parent != nullptr; }
  };

  Impl(const Model& m, RadixTreeOptions o) : model(m), options(o) {
    const ModelConfig& c = m.config();
    bytes_per_token = 3 * c.n_layers * c.n_kv_heads * c.head_dim * sizeof(float) + sizeof(int32_t);
    by_id[0] = &root;
  }

  const Model& model;
  const RadixTreeOptions options;
  size_t bytes_per_token = 0;
  mutable std::mutex mu;
  // Everything below is GUARDED_BY(mu).
  Node root;
  std::unordered_map<NodeId, Node*> by_id;
  NodeId next_id = 1;
  uint64_t tick = 0;
  RadixTreeStats stats;

  // Splits `node`'s edge after `k` tokens; returns the new upper node (which takes its place).
  Node* Split(Node* node, size_t k) {
    auto upper = std::make_unique<Node>();
    upper->id = next_id++;
    upper->parent = node->parent;
    upper->slab = std::make_shared<const KVSlab>(node->slab->Slice(0, k));
    upper->depth_end = node->depth_end - node->edge_size() + k;
    upper->last_access = node->last_access;
    upper->hits = node->hits;
    auto& slot = node->parent->children[node->slab->tokens[0]];
    std::unique_ptr<Node> lower = std::move(slot);
    lower->slab = std::make_shared<const KVSlab>(lower->slab->Slice(k, lower->edge_size() - k));
    lower->parent = upper.get();
    Node* up = upper.get();
    up->children[lower->slab->tokens[0]] = std::move(lower);
    by_id[up->id] = up;
    slot = std::move(upper);
    ++stats.node_count;  // slicing conserves tokens and bytes exactly
    return up;
  }

  // Walks `tokens[0, limit)`; splits an edge at a mid-edge divergence when `split`.
  std::pair<Node*, size_t> Walk(std::span<const int32_t> tokens, size_t limit, bool split) {
    Node* n = &root;
    size_t pos = 0;
    while (pos < limit) {
      auto it = n->children.find(tokens[pos]);
      if (it == n->children.end()) break;
      Node* c = it->second.get();
      const std::vector<int32_t>& edge = c->slab->tokens;
      size_t m = 0;
      while (m < edge.size() && pos + m < limit && edge[m] == tokens[pos + m]) ++m;
      pos += m;
      if (m < edge.size()) {
        if (split) n = Split(c, m);
        break;
      }
      n = c;
    }
    return {n, pos};
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
    n->parent->children.erase(n->slab->tokens[0]);  // destroys n
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
        stats.unique_tokens -= excess_tokens;
        stats.evicted_tokens += excess_tokens;
        continue;
      }
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

RadixTree::RadixTree(const Model& model, RadixTreeOptions options) : impl_(std::make_unique<Impl>(model, options)) {}
RadixTree::~RadixTree() = default;

void RadixTree::ReleaseLease(NodeId node) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->by_id.find(node);
  if (it != impl_->by_id.end() && it->second->leases > 0) --it->second->leases;  // gone if policy-evicted
}

LookupResult RadixTree::Lookup(std::span<const int32_t> tokens) {
  std::vector<std::shared_ptr<const KVSlab>> path;
  LookupResult out{impl_->model.NewCache()};
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    const size_t limit = tokens.empty() ? 0 : tokens.size() - 1;
    auto [node, matched] = impl_->Walk(tokens, limit, /*split=*/true);
    for (Impl::Node* n = node; n->parent != nullptr; n = n->parent) path.push_back(n->slab);
    RadixTreeStats& s = impl_->stats;
    ++s.lookups;
    (matched > 0 ? s.hits : s.misses) += 1;
    s.hit_tokens += matched;
    s.prefilled_tokens += tokens.size() - matched;
    if (node != &impl_->root) {
      ++node->hits;
      ++node->leases;
      impl_->Touch(node);
      out.lease = Lease(this, node->id);
    }
    out.node = node->id;
    out.matched_tokens = matched;
  }
  // Assemble outside the lock: slabs are immutable and shared.
  (void)out.cache.Reserve(out.matched_tokens);  // within the context: these tokens were prefilled once
  for (auto it = path.rbegin(); it != path.rend(); ++it) (void)out.cache.AppendSlab(**it);
  return out;
}

size_t RadixTree::MatchLength(std::span<const int32_t> tokens) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return const_cast<Impl*>(impl_.get())->Walk(tokens, tokens.size(), /*split=*/false).second;
}

Status RadixTree::Insert(std::span<const int32_t> tokens, const KVCache& cache) {
  if (!cache.SameBinding(impl_->model.NewCache())) return InvalidArgument("RadixTree::Insert: the cache belongs to another model");
  if (tokens.size() > cache.size() || !std::equal(tokens.begin(), tokens.end(), cache.tokens().begin())) {
    return InvalidArgument("RadixTree::Insert: the cache does not hold these " + std::to_string(tokens.size()) + " tokens");
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto [node, matched] = impl_->Walk(tokens, tokens.size(), /*split=*/true);
  if (matched < tokens.size()) {
    auto leaf = std::make_unique<Impl::Node>();
    leaf->id = impl_->next_id++;
    leaf->parent = node;
    leaf->slab = std::make_shared<const KVSlab>(*cache.CopySpan(matched, tokens.size() - matched));
    leaf->depth_end = tokens.size();
    impl_->by_id[leaf->id] = leaf.get();
    impl_->stats.unique_tokens += leaf->edge_size();
    impl_->stats.resident_bytes += leaf->slab->size_bytes();
    ++impl_->stats.node_count;
    node = leaf.get();
    node->parent->children[tokens[matched]] = std::move(leaf);
  }
  impl_->Touch(node);
  if (impl_->options.budget_bytes > 0) impl_->EvictToBudget(impl_->options.budget_bytes);
  return Status::Ok();
}

Result<NodeId> RadixTree::FindNode(std::span<const int32_t> tokens) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto [node, matched] = impl_->Walk(tokens, tokens.size(), /*split=*/true);
  if (matched != tokens.size()) return NotFound("RadixTree::FindNode: only " + std::to_string(matched) + " of " +
                                                std::to_string(tokens.size()) + " tokens are cached");
  return node->id;
}

Result<EvictedSubtree> RadixTree::EvictNode(NodeId id) {
  if (id == 0) return InvalidArgument("RadixTree::EvictNode: the root cannot be evicted");
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->by_id.find(id);
  if (it == impl_->by_id.end()) return NotFound("RadixTree::EvictNode: no node " + std::to_string(id));
  return impl_->Remove(it->second);
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

size_t NextCacheAware(const RadixTree& tree, const std::vector<std::span<const int32_t>>& waiting) {
  size_t best = 0, best_len = 0;
  for (size_t i = 0; i < waiting.size(); ++i) {
    size_t len = tree.MatchLength(waiting[i]);
    if (len > best_len) best = i, best_len = len;
  }
  return best;
}

}  // namespace fak
