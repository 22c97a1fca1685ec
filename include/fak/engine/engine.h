// Engine: the serving scheduler — many requests, one model, one batched forward pass per step.
//
// Each step admits waiting requests (round robin over tenants; within a tenant, the one with the
// longest prefix in the tree among the first few waiting), gives each its longest reusable
// prefix from the radix tree (through the manifest gate, with the request's tenant), and runs one
// Model::PrefillBatch holding a bounded prefill chunk of each request still reading its prompt and
// the one-token decode of every request already generating (continuous batching). It samples,
// streams text through each request's callback, and gives finished contexts back to the tree.
//
// Memory: one budget over the KV of every running request and the tree. When a step would pass
// it, the tree gives back unleased tokens first; then the most recently admitted running request is
// preempted (background requests first): its cache is dropped and it waits again, first in its
// tenant's line, with its tokens so far and its Generation (sampler, text stream); on resume it recomputes them (prefix reuse
// included).
//
// Priority: background requests (RequestPriority) are admitted only while no interactive request
// waits, get the prefill tokens interactive ones leave in a step, and give their slot back (their
// computed prefix goes to the tree) when an interactive request waits for one.
//
// Exactness: a request's tokens and the logits they were sampled from are the same bits whether it
// runs alone or among others, chunked or not, with or without prefix reuse, preempted or not
// (witness Witness.ScheduledEqualsAlone; docs/engine.md has the argument), and with or without
// speculative decoding (EngineOptions::speculation: a decode verifies a draft as a multi-token
// chunk of the batch; Witness.SpeculativeEqualsPlainInEngine).
//
// KV tier (EngineOptions::pager): when the tree holds less of a prompt than a lower tier may, Submit
// pages the rest of the prefix in on the caller's thread — every slab verified by the manifest gate
// under the request's tenant, then inserted into the tree as radix nodes — so admission finds it
// there and the step thread does no tier I/O. Only when the tree lost it again before admission
// (budget eviction) does admission page it in once more, on the step thread. Anything refused is
// counted (EngineStats) and prefilled: unverified KV is never served. Spill to a tier is the
// tree's: RadixTreeOptions::spill (docs/engine.md, docs/kv-tier.md). A request given as messages (or
// with EngineRequest::sources) records which text each run of its prompt came from, in the tree and
// every spilled slab, so quarantining or erasing a text (SourceSweeper) removes its KV everywhere.
//
// Embeddings (EngineRequest::embed): a request that reads its prompt in the same batches, every
// row's final hidden state pooled (LogitsMode::kHidden), and finishes with the embedding instead of
// sampling; its KV neither comes from the tree nor goes to it. Its embedding is the bits Embed gives
// the text alone (Witness.EmbeddingInBatchEqualsAlone).
//
// Threads: Submit, Cancel, Wait and Stats may be called from any thread. With
// EngineOptions::start_thread the engine steps itself on its own thread; without, the caller calls
// Step (deterministic tests) or Wait, which steps until its request is done. Callbacks run on the
// stepping thread. Shutdown (also the destructor) cancels what is queued or running, or first lets
// it finish (ShutdownMode::kDrain); no callback runs after it returns.
// docs/engine.md describes the step loop, budget, preemption and fairness.
#ifndef FAK_ENGINE_ENGINE_H_
#define FAK_ENGINE_ENGINE_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "fak/core/env.h"
#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/engine/request.h"
#include "fak/grammar/grammar_constraint.h"
#include "fak/model/model.h"
#include "fak/model/speculation.h"
#include "fak/regen/regen_driver.h"
#include "fak/session/radix_tree.h"
#include "fak/session/source_span.h"
#include "fak/tokenizer/chat_template.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak {

struct EngineOptions {
  // How requests given as messages are rendered; null: such requests are refused. Default: null.
  std::shared_ptr<const ChatTemplate> chat_template;
  // Requests decoding or prefilling at once (>= 1). Default: 16.
  size_t max_running = 16;
  // Requests waiting for admission; Submit answers Unavailable past it (>= 1). Default: 256.
  size_t max_queued = 256;
  // Requests one tenant may have waiting (its share of max_queued), so one tenant cannot fill the
  // queue for all; Submit answers Unavailable past it. 0: max_queued. Default: 0.
  size_t max_queued_per_tenant = 0;
  // Prompt tokens one request prefills in one step (>= 1). Default: 256.
  size_t prefill_chunk_tokens = 256;
  // Tokens in one step's batch, decodes included (>= max_running, so every decode fits). Default: 512.
  size_t step_token_budget = 512;
  // A waiting request whose prompt shares at least this many more tokens with the prompt a running
  // request of its tenant is still reading than the tree holds waits until that prompt is read and
  // in the tree, instead of computing the shared tokens a second time (agents that share a system
  // prompt, submitted together); one arriving after that prompt was read starts from the running
  // request's KV, put into the tree at its admission. 0 = never wait nor share. Default: 32.
  size_t shared_prefix_wait_tokens = 32;
  // Cache-aware order within a tenant (SGLang's longest-prefix-match, per tenant): admission takes,
  // among the first `cache_aware_window` requests waiting in a tenant's line, the one with the
  // longest prefix that tenant may reuse from the tree (the earliest on ties). A request passed over
  // this many times goes next, so none waits forever. 0 or 1: first come, first served. Default: 8.
  size_t cache_aware_window = 8;
  // Bytes of KV for running requests and the tree together; 0 = unbounded. A request whose whole
  // context (prompt + max_tokens) could not fit alone is refused at Submit. Default: 0.
  size_t kv_budget_bytes = 0;
  // Start the step thread at Create. Default: true.
  bool start_thread = true;
  // The clock of deadlines and timings; null = Env::Default(). Must outlive the engine.
  Env* env = nullptr;
  // A tree to share (built on the same model and tokenizer; must outlive the engine); null = the
  // engine builds its own from `tree_options`. Its budget is the engine's: kv_budget_bytes.
  RadixTree* tree = nullptr;
  // The engine's own tree; `spill` (a TierSpiller) takes what budget eviction removes.
  RadixTreeOptions tree_options;
  // A lower KV tier (e.g. TierPager over a directory or Redis store) the engine's own tree pages
  // prompts' missing prefixes in from (RadixTree::SetPager); thread-safe, must outlive the engine.
  // With `tree`, give that tree its pager instead (InvalidArgument here). Null = none. Default: null.
  KVPager* pager = nullptr;
  // Speculative decoding for every generating request that does not opt out
  // (EngineRequest::speculate): each step, a decoding request's draft (prompt lookup, or a draft
  // model drafting on the step thread) is verified as one multi-token chunk of the batch, its
  // rejected tail cut from the cache. Tokens and logits stay those of plain decoding. Drafts take
  // step tokens after every decode and before prompt chunks. Default: none.
  SpeculationOptions speculation;
};

struct EngineStats {
  size_t queued = 0, running = 0;  // every priority
  size_t background_queued = 0, background_running = 0;
  size_t steps = 0;             // steps that ran a batch
  size_t batch_items = 0;       // sum over steps of the requests in the batch
  size_t max_batch_items = 0;
  size_t prefill_chunks = 0;    // batch items that ended before their request's prompt did
  size_t preemptions = 0;
  size_t admitted = 0, finished = 0;
  size_t session_kv_bytes = 0;  // KV the running requests own (their tree prefixes are the tree's)
  size_t tree_kv_bytes = 0;
  // Speculative decoding (EngineOptions::speculation): drafts verified, their tokens, and the ones kept.
  size_t drafts = 0, draft_tokens = 0, accepted_draft_tokens = 0;
  // KV tier (EngineOptions::pager): page-ins asked for, prompt tokens they supplied, and the ones
  // that stopped short because a slab was refused or the tier could not be asked (not for a mere
  // absence), by reason (PageInFailure; kAbsent counts absences).
  size_t page_ins = 0, paged_tokens = 0, page_in_refusals = 0;
  size_t page_in_failures[kNumPageInFailures] = {};
};

// The source runs of a rendered chat: message i's tokens of `prompt` (the token ids of `rendered`;
// its piece of the rendering, markup included) tagged with Digest::Of(messages[i].content) — the
// Planner's SourceDigest of a message, so one denylist entry or EraseSource covers the KV of both.
// Piece borders come from EncodePieces; from where the pieces tokenized alone stop agreeing with
// `prompt` (templates whose pieces meet inside text), a message's run extends to the end of the
// prompt: erasing a text may take more KV than it must, never less. The engine applies this to
// requests given as messages; a host that tokenizes a chat itself passes it as
// EngineRequest::sources.
FAK_EXPORT Result<std::vector<SourceSpan>> ChatSourceRuns(const Tokenizer& tokenizer, const RenderedChat& rendered,
                                               std::span<const ChatMessage> messages, std::span<const int32_t> prompt);

enum class ShutdownMode {
  kCancel,  // queued and running requests finish with kCancelled after the step in progress
  kDrain,   // no new submissions; every accepted request runs to its end first
};

class FAK_EXPORT Engine {
 public:
  // `model` and `tokenizer` must outlive the engine. InvalidArgument naming a bad option.
  static Result<std::unique_ptr<Engine>> Create(const Model& model, const Tokenizer& tokenizer,
                                                EngineOptions options = {});
  ~Engine();  // Shutdown(kCancel)
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Turns a request given as messages into the token form Submit runs: its tools (EngineRequest::tools)
  // put in the template's call convention, rendered with the chat template, tokenized with the
  // messages' text as plain text (never markup), `sources` set to each message's run
  // (ChatSourceRuns), empty stop_tokens to EndOfGenerationTokens, and the grammar of forced calls
  // (tool_choice required / named) installed as `constraint`; `messages` is cleared, `tools` kept
  // (read the reply with ToolCallReader). A request given as token ids is left as it is. Submit
  // calls it; a host calls it first to size or probe a chat request without tokenizing chat itself.
  // On error `request` is unchanged: InvalidArgument (both prompt and messages, or sources with
  // messages, bad tools, forced calls with a constraint, or what the
  // template refuses), Unsupported (tools offered to a template whose call format fak does not
  // read), FailedPrecondition without EngineOptions::chat_template.
  Status Prepare(EngineRequest& request) const;
  // Queues a request. InvalidArgument for a bad tenant, prompt, sampling or max_tokens;
  // ResourceExhausted when prompt + max_tokens exceeds the context length or the KV budget;
  // Unavailable when max_queued requests wait (retry later); FailedPrecondition after Shutdown.
  Result<RequestId> Submit(EngineRequest request);
  // Asks `id` to stop, queued or running (mid-prefill included): it finishes with kCancelled at the
  // latest after the step in progress; no callback for it starts after Cancel returns. OK when it
  // has already finished; NotFound for an id never issued or already collected by Wait.
  Status Cancel(RequestId id);
  // Blocks until `id` finishes and hands over its result (once: NotFound afterwards, and for an id
  // never issued). Without the step thread it steps the engine itself.
  Result<EngineResult> Wait(RequestId id);

  // One scheduling step (admit, batch, sample, stream, finish); returns whether work remains
  // (requests queued or running). Safe alongside the step thread, which it merely joins in.
  bool Step();
  // Stops the engine (idempotent); see ShutdownMode. Must not be called from a callback.
  void Shutdown(ShutdownMode mode = ShutdownMode::kCancel);

  EngineStats Stats() const;
  // The tree requests reuse prefixes from (the engine's own, or the one it was given).
  RadixTree& tree();
  // EngineOptions::chat_template; null when the engine takes no messages.
  const ChatTemplate* chat_template() const;
  // The tokenizer's vocabulary as grammar constraints need it (TokenVocabulary): built by the first
  // call (about a second at a 262k vocabulary), then shared. Thread-safe.
  Result<std::shared_ptr<const TokenVocabulary>> Vocabulary() const;

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Engine::Wait for each of `ids` in order, while a watcher thread asks `cancelled` every 20 ms and
// cancels all of them once it says so (a host's "the client went away"). One result per id.
FAK_EXPORT std::vector<Result<EngineResult>> WaitUnlessCancelled(Engine& engine, std::span<const RequestId> ids,
                                                                 const std::function<bool()>& cancelled);

}  // namespace fak

#endif  // FAK_ENGINE_ENGINE_H_
