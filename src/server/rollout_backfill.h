// A blue_green rollout's backfill run through the new model's serving engine: each hot conversation
// becomes one background, prefill-only EngineRequest given as messages, so the engine renders it
// with its chat template exactly as it renders the live /v1/chat/completions request for the same
// messages (Engine::Prepare), and its KV lands in the tree that engine serves from after cutover.
// The engine batches it with whatever else it runs and admits it only while no interactive request
// waits; a thread here keeps a few in flight, waits for them, and then checks the warmed KV
// (Verify) before the rollout may cut over.
//
// Nothing sealed is prefilled: a sealed message runs as its stub (as the chat endpoint's screen
// renders it), a message sealed after the hot set was taken is swapped for its stub before its
// request is submitted — and its KV evicted if it was sealed while the request ran — and a
// conversation holding a text the screening chain quarantines now is refused whole.
//
// Thread-safety: Submit before Start (Rollout::Begin calls it); Stats from any thread; Verify on
// one thread at a time (the backfill's own, through the rollout's Poll). The engine, model and
// chain must outlive this; the destructor cancels what is in flight and joins the thread.
#ifndef FAK_SRC_SERVER_ROLLOUT_BACKFILL_H_
#define FAK_SRC_SERVER_ROLLOUT_BACKFILL_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fak/engine/engine.h"
#include "fak/regen/rollout.h"
#include "fak/screen/screen.h"
#include "src/server/conversations.h"

namespace fak::internal {

struct EngineBackfillOptions {
  // Background requests submitted and not yet finished at once: bounds the engine's queue (a hot
  // set may hold more conversations than max_queued) and the work a rollout leaves behind when it
  // is dropped. Default: 4.
  size_t max_in_flight = 4;
  // Backfilled contexts whose tree KV Verify compares with a recompute. Default: 4.
  size_t verify_samples = 4;
};

struct EngineBackfillStats {
  uint64_t queued = 0;     // accepted by Submit, not yet given to the engine
  uint64_t submitted = 0;  // given to the engine (Engine::Submit succeeded)
  uint64_t finished = 0;   // their prompts are read and in the tree
  uint64_t failed = 0;     // refused by the engine, or ended with an error or cancelled
  uint64_t sealed_meanwhile = 0;  // messages sealed after the hot set was taken (run as stubs, KV evicted)
  uint64_t prompt_tokens = 0;     // of the finished requests
  uint64_t cached_tokens = 0;     // of those, found in the tree already (an earlier backfill's prefix)
  uint64_t prefilled_tokens = 0;  // prompt_tokens - cached_tokens: what the backfill computed
  size_t verify_samples = 0, verified = 0;  // contexts checked, and found equal to their recompute
  std::string verify_error;                 // the first difference (empty: none)
  size_t in_flight = 0;                     // submitted, not yet finished
  bool running = false;                     // Start was called and the thread has not ended
  int64_t begin_ns = 0, end_ns = 0;         // Env::Default() monotonic: Start, the thread's end (0: not yet)
};

class EngineBackfill final : public BackfillSink {
 public:
  // `engine` serves `model` (the new weights); `chain` is the planner's (its denylist and admitters);
  // `chats` are the hot set's conversations, found by their ids (TranscriptRef::session).
  EngineBackfill(Engine& engine, const Model& model, const ScreenChain& chain, std::vector<HeldChat> chats,
                 EngineBackfillOptions options = {});
  ~EngineBackfill() override;
  EngineBackfill(const EngineBackfill&) = delete;
  EngineBackfill& operator=(const EngineBackfill&) = delete;

  // Queues the backfill of `entry`'s conversation. false (skipped) when the tree holds its whole
  // prompt already; NotFound for a conversation it was not given; FailedPrecondition when the chain
  // quarantines one of its texts; Unavailable when the denylist or an admitter cannot answer;
  // the engine's Prepare errors (a template that refuses the messages).
  Result<bool> Submit(const HotSetTracker::Entry& entry, std::function<void()> finished) override;
  // Starts the thread that submits and waits for the queued requests, then calls `when_done` on it
  // (unless stopped first). FailedPrecondition when started already.
  Status Start(std::function<void()> when_done);
  // Cancels what is in flight, drops what is queued (each `finished` still called) and joins.
  void Stop();

  // The check before cutover: for up to verify_samples backfilled contexts still resident, the
  // tree's KV for the prompt (all but its last token, as a lookup serves it) against a fresh
  // prefill of the same tokens by the same model (VerifyRegenerated: equal cache digests).
  // VerificationFailed naming the conversation and both digests at the first difference;
  // FailedPrecondition when backfilled contexts exist but none is resident to check.
  Status Verify();

  EngineBackfillStats Stats() const;

 private:
  struct Item {
    std::string session;
    EngineRequest request;              // prepared: token ids, sources; one per chat
    std::vector<ChatMessage> messages;  // as rendered (stubs included), to re-prepare on a late seal
    std::vector<Digest> unsealed;       // digests of the texts sent as they are
    std::vector<size_t> unsealed_index; // their message indices
    std::function<void()> finished;
  };
  struct InFlight {
    RequestId id = 0;
    Item item;
  };
  void Run(std::function<void()> when_done);
  // Swaps in the stub of any message sealed since the hot set was taken (re-preparing the request).
  // Unavailable when the denylist cannot be asked.
  Status SealLate(Item& item);
  void Finish(Item& item, bool ok);

  Engine& engine_;
  const Model& model_;
  const ScreenChain& chain_;
  const EngineBackfillOptions options_;
  std::map<std::string, HeldChat> chats_;  // by conversation id

  mutable std::mutex mu_;  // guards everything below
  std::deque<Item> queue_;
  std::vector<RequestId> in_flight_ids_;
  // Finished contexts Verify may check: tenant and prompt tokens.
  std::vector<std::pair<std::string, std::vector<int32_t>>> done_;
  EngineBackfillStats stats_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace fak::internal

#endif  // FAK_SRC_SERVER_ROLLOUT_BACKFILL_H_
