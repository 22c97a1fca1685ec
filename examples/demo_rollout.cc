// The demo's rollout section: a model change misses every cached span at once (the ModelID axis);
// because the text survived, the new model's cache is rebuilt from it — lazily on each miss, or
// ahead of cutover for the hot set (blue_green) behind live work.
#include "examples/demo_rollout.h"

#include <string>
#include <vector>

#include "examples/demo_report.h"
#include "fak/fak.h"
#include "fak/regen/rollout.h"

namespace fak::demo {
namespace {

struct Served {
  size_t hits = 0, recomputes = 0, prefilled = 0;
};

// Serves every session once through whichever model the rollout routes it to.
Result<Served> ServeAll(Rollout& rollout, const std::vector<TranscriptRef>& sessions) {
  Served s;
  for (const TranscriptRef& t : sessions) {
    FAK_ASSIGN_OR_RETURN(Materialized m, rollout.Route(t.session).Materialize(kDefaultTenant, t));
    s.hits += m.verdict == MaterializeVerdict::kHit;
    s.recomputes += m.verdict == MaterializeVerdict::kRecompute;
    s.prefilled += m.prefilled_tokens;
  }
  return s;
}

Result<std::vector<TranscriptRef>> StoreSessions(TextCorpus& corpus) {
  std::vector<TranscriptRef> sessions;
  FAK_ASSIGN_OR_RETURN(Digest system, corpus.PutSource("system: You are a support agent for a bike shop.\n"));
  for (int s = 0; s < 6; ++s) {
    TranscriptRef t{"customer-" + std::to_string(s), {system}};
    for (int turn = 0; turn < 3; ++turn) {
      FAK_ASSIGN_OR_RETURN(Digest d, corpus.PutSource("user: customer " + std::to_string(s) + " asks question " +
                                                      std::to_string(turn) + " about gears and brakes.\n"));
      t.segments.push_back(d);
    }
    sessions.push_back(std::move(t));
  }
  return sessions;
}

}  // namespace

// Returns false when a check fails.
bool RolloutSection(int number, const Model& model_a, const Tokenizer& tok) {
  Section(number, "model rollout: the cache is rebuilt from text, not carried over");
  auto fail = [](const Status& s) {
    std::printf("  rollout failed: %s\n", s.ToString().c_str());
    return false;
  };
  auto model_b = Model::Synthetic(model_a.config(), /*seed=*/4242);  // new weights, same shape
  if (!model_b.has_value()) return fail(model_b.error());
  const ShareDecision share = CanShare(model_a, tok, **model_b, tok);
  Line("can share KV?", share.share ? "yes" : "no: " + std::string(BindingAxisName(*share.axis)) + " differs");
  std::unique_ptr<BlobStore> blobs = MakeMemoryBlobStore();
  TextCorpus corpus(*blobs);
  const ScreenChain chain = ScreenChain::Default();
  auto sessions = StoreSessions(corpus);
  if (!sessions.has_value()) return fail(sessions.error());

  Table table({"policy", "served by B", "HIT", "RECOMPUTE", "prefilled live", "backfilled"});
  bool ok = !share.share;
  for (RolloutPolicy policy : {RolloutPolicy::kFlush, RolloutPolicy::kLazy, RolloutPolicy::kBlueGreen}) {
    RadixTree tree_a(model_a, tok), tree_b(**model_b, tok);
    RegenDriver a({&model_a, &tok, &tree_a}, corpus, chain), b({model_b->get(), &tok, &tree_b}, corpus, chain);
    HotSetTracker hot;
    BackfillScheduler scheduler;  // the default Env's monotonic clock
    for (const TranscriptRef& t : *sessions) {  // traffic before the rollout, all on A
      auto m = a.Materialize(kDefaultTenant, t);
      if (!m.has_value()) return fail(m.error());
      hot.Touch(t, m->tokens.size(), Env::Default()->NowMonotonicNanos());
    }
    RolloutOptions options;
    options.policy = policy;
    Rollout rollout(a, b, options);
    if (Status s = rollout.Begin(hot, scheduler); !s.ok()) return fail(s);
    scheduler.RunUntilIdle();  // no live traffic here: backfill (if any) runs at full quantum
    rollout.Poll();
    auto served = ServeAll(rollout, *sessions);
    if (!served.has_value()) return fail(served.error());
    table.Add({std::string(RolloutPolicyName(policy)), rollout.cut_over() ? "yes" : "no", std::to_string(served->hits),
               std::to_string(served->recomputes), std::to_string(served->prefilled),
               std::to_string(b.Stats().backfilled_tokens)});
    // blue_green warmed the hot set: every session is a HIT on B at once; the others recompute.
    ok &= rollout.cut_over() && (policy == RolloutPolicy::kBlueGreen ? served->hits == sessions->size()
                                                                      : served->recomputes == sessions->size());
  }
  table.Print();
  Line("validation", "regenerated spans are checked against model B's own recompute, never A's KV");
  return ok;
}

}  // namespace fak::demo
