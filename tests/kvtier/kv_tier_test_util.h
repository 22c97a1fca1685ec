// KV tier test helpers: a "worker" (model, tokenizer, radix tree, optional tier pager and spiller,
// regen driver) made from scratch, as a fresh process would make it, and the reference recompute.
#ifndef FAK_TESTS_KVTIER_KV_TIER_TEST_UTIL_H_
#define FAK_TESTS_KVTIER_KV_TIER_TEST_UTIL_H_

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "fak/kvtier/kv_tier_store.h"
#include "fak/kvtier/slab_file.h"
#include "fak/kvtier/tier_pager.h"
#include "fak/kvtier/tier_spiller.h"
#include "fak/regen/regen_driver.h"
#include "tests/regen/regen_test_util.h"

namespace fak::testing {

struct Worker {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<TierSpiller> spiller;  // when spilling
  std::unique_ptr<RadixTree> tree;
  std::unique_ptr<TierPager> pager;      // when paging in
  std::unique_ptr<RegenDriver> driver;
};

struct WorkerOptions {
  uint64_t seed = 1;
  KVTierStore* page_from = nullptr;   // pager over this tier
  KVTierStore* spill_to = nullptr;    // spiller into this tier
  bool write_through = false;
  const Denylist* denylist = nullptr;  // the pager's; null = the chain's
  const AccessPolicy* access = nullptr;  // the tree's tenancy rules; null = tenant-only
};

// Everything new: a model from its seed, a byte tokenizer, an empty tree.
inline Worker MakeWorker(TextCorpus& corpus, const ScreenChain& chain, WorkerOptions o) {
  Worker w;
  w.model = *Model::Synthetic(RegenConfig(), o.seed);
  w.tokenizer = MakeByteTokenizer();
  RadixTreeOptions tree_options;
  if (o.access != nullptr) tree_options.access = *o.access;
  if (o.spill_to != nullptr) {
    w.spiller = std::make_unique<TierSpiller>(*o.spill_to);
    tree_options.spill = w.spiller.get();
    tree_options.write_through = o.write_through;
  }
  w.tree = std::make_unique<RadixTree>(*w.model, *w.tokenizer, std::move(tree_options));
  if (o.page_from != nullptr) {
    w.pager = std::make_unique<TierPager>(*o.page_from, w.tree->access_policy(),
                                          o.denylist != nullptr ? o.denylist : &chain.denylist());
    w.tree->SetPager(w.pager.get());  // the tree's way in; the driver just looks up
  }
  w.driver = std::make_unique<RegenDriver>(RegenTarget{w.model.get(), w.tokenizer.get(), w.tree.get()}, corpus, chain);
  return w;
}

// Next-token logits after `tokens`, computed from nothing by `model`.
inline std::vector<float> RecomputeLogits(const Model& model, std::span<const int32_t> tokens) {
  KVCache cache = model.NewCache();
  return *model.Prefill(&cache, tokens, LogitsMode::kLast);
}

// The slab files a directory tier holds, sorted.
inline std::vector<std::string> SlabFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/slabs")) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

inline TranscriptRef Conversation(TextCorpus& corpus, const std::string& name) {
  return PutTranscript(corpus, name,
                       {"system: you are a careful assistant who answers in one line.\n",
                        "user: summarise the " + name + " release notes.\n", "assistant: the release moves to March.\n",
                        "user: and the fixes?\n"});
}

}  // namespace fak::testing

#endif  // FAK_TESTS_KVTIER_KV_TIER_TEST_UTIL_H_
