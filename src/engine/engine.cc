// Engine: admission, one batched forward pass per step, sampling, streaming, finishing.
//
// Locks, always taken in this order: step_mu_ (the running set: whoever steps), deliver_mu_ (a
// callback is running), mu_ (queues, results, counters). No lock is held across a forward pass but
// step_mu_, and none across a callback but step_mu_ and deliver_mu_.
#include "fak/engine/engine.h"

#include <algorithm>
#include <utility>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fak/core/digest.h"
#include "fak/gate/kv_manifest.h"
#include "fak/grammar/grammar.h"
#include "fak/grammar/grammar_constraint.h"
#include "fak/model/generation.h"
#include "fak/session/source_span.h"
#include "fak/tokenizer/chat_template.h"
#include "src/engine/fair_share.h"
#include "src/grammar/tool_calls.h"

namespace fak {

namespace {

// The engine whose callback this thread is running: Cancel from inside a callback must not wait
// for the callback to end.
thread_local const void* t_delivering_for = nullptr;

// The generation a request asks for: its sampler, stops and limit.
Result<Generation> GenerationFor(const EngineRequest& request, const Tokenizer& tokenizer) {
  GenerateParams params;
  params.max_new_tokens = request.max_tokens;
  params.stop_tokens = request.stop_tokens;
  params.sampling = request.sampling;
  params.constraint = request.constraint;
  params.spelled_tokens = request.spelled_tokens;
  return Generation::Create(std::move(params), request.stop_strings, &tokenizer);
}

struct Job {
  Job(EngineRequest r, Generation g) : request(std::move(r)), context(request.prompt), generation(std::move(g)) {
    result.usage.prompt_tokens = request.prompt.size();
  }
  // Tokens of the context the cache does not hold yet: the unread prompt, or the last sampled token.
  size_t Pending() const { return context.size() - cache->size(); }
  bool background() const { return request.priority == RequestPriority::kBackground; }
  // Prefill only: its prompt's KV goes to the tree and nothing is sampled.
  bool warm_only() const { return request.max_tokens == 0 && !embeds(); }
  // An embedding request (EngineRequest::embed): reads its prompt, pools, never touches the tree.
  bool embeds() const { return request.embed.has_value(); }

  RequestId id = 0;  // set at Submit, under mu_
  EngineRequest request;
  std::vector<int32_t> context;  // the prompt, then every generated token
  Generation generation;         // chooses its tokens, decides its stops; survives preemption
  EngineResult result;
  std::atomic<bool> cancel_requested{false};
  bool done = false;  // under mu_

  // While running; touched only under step_mu_.
  std::optional<KVCache> cache;
  Lease lease;
  uint64_t admission = 0;  // order of (re)admission: preemption takes the latest
  bool admitted_before = false;
  size_t computed_before_preemption = 0;
  bool followers_waiting = false;  // a waiting request shares its prompt: insert it once read
  std::vector<size_t> follower_prefixes;  // how much of its context those waiting requests share
  size_t passed_over = 0;          // times a later request of its line was admitted first (under mu_)
  // The prefix of its context the tree held after Submit paged the tier in: admission pages in
  // again only when the tree has lost some of it since. Set before the job is shared.
  size_t paged_prefix = 0;
  bool prompt_in_tree = false;  // its prompt was inserted when read (a tier-bound tree)
  // Which text each run of the prompt came from (ChatSourceRuns of its messages, or the host's
  // EngineRequest::sources): every tree insert records them, so the tree and tiers index it by text.
  std::vector<SourceSpan> sources;
  // Speculative decoding (EngineOptions::speculation): its drafter, and the draft planned for this
  // step (fed after its last token; under step_mu_).
  std::unique_ptr<Drafter> drafter;
  std::vector<int32_t> draft;
  // An embedding request's pooled hidden states so far; restarted at each admission (its cache
  // starts empty then), so a preemption changes no bit.
  std::optional<HiddenPooler> pooler;
};

// A request's share of one step: `n` of its pending tokens (a decode's one, plus its draft);
// `completes` when they are all of them, so the step ends with its next-token logits.
struct Planned {
  Job* job;
  size_t n;
  bool completes;
};
Planned PlanFor(Job* job, size_t n) { return {job, n, n == job->Pending()}; }

}  // namespace

// engine.h says what; the widening keeps erasure on the safe side where borders are unknown.
Result<std::vector<SourceSpan>> ChatSourceRuns(const Tokenizer& tokenizer, const RenderedChat& rendered,
                                               std::span<const ChatMessage> messages,
                                               std::span<const int32_t> prompt) {
  FAK_ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> pieces, EncodePieces(tokenizer, rendered));
  size_t agree = 0;  // leading tokens of `prompt` equal to the pieces' concatenation
  for (const std::vector<int32_t>& piece : pieces) {
    size_t i = 0;
    while (i < piece.size() && agree < prompt.size() && piece[i] == prompt[agree]) ++i, ++agree;
    if (i < piece.size()) break;
  }
  std::vector<SourceSpan> runs;
  size_t from = 0;
  for (size_t i = 0; i < messages.size() && i < pieces.size(); ++i) {
    const size_t end = from + pieces[i].size();
    const size_t begin = std::min(from, agree);
    const size_t until = end <= agree ? end : prompt.size();
    if (until > begin) runs.push_back(SourceSpan{begin, until - begin, Digest::Of(messages[i].content)});
    from = end;
  }
  return runs;
}

namespace {

// The engine's own tree, given EngineOptions::pager as its way in from a lower tier.
std::unique_ptr<RadixTree> OwnTree(const Model& model, const Tokenizer& tokenizer, const EngineOptions& options) {
  auto tree = std::make_unique<RadixTree>(model, tokenizer, options.tree_options);
  tree->SetPager(options.pager);
  return tree;
}

}  // namespace

struct Engine::Impl {
  Impl(const Model& model, const Tokenizer& tokenizer, EngineOptions options)
      : model_(model), tokenizer_(tokenizer), options_(std::move(options)),
        env_(options_.env != nullptr ? options_.env : Env::Default()),
        owned_tree_(options_.tree != nullptr ? nullptr : OwnTree(model, tokenizer, options_)),
        tree_(options_.tree != nullptr ? options_.tree : owned_tree_.get()),
        bytes_per_token_(tree_->BytesPerToken()) {}

  Status Prepare(EngineRequest& request) const;
  // The vocabulary for a grammar, with the special tokens a reply spells as their text (one per
  // set of them, built on first use).
  Result<std::shared_ptr<const TokenVocabulary>> Vocabulary(std::vector<int32_t> spelled = {}) const;
  Result<RequestId> Submit(EngineRequest request);
  Status Cancel(RequestId id);
  Result<EngineResult> Wait(RequestId id);
  bool Step();
  void Shutdown(ShutdownMode mode);
  EngineStats Stats() const;
  void RunLoop();

  bool HasWorkLocked() const { return queued_size() > 0 || n_running_ > 0; }
  // The line a job waits in: its priority's.
  internal::TenantQueues<Job*>& LineOf(const Job& job) { return job.background() ? background_ : queued_; }
  size_t queued_size() const { return queued_.size() + background_.size(); }
  std::vector<Job*> QueuedItems() const;
  // The next request to admit (mu_ held; something waits): interactive first, cache-aware within
  // its tenant's line.
  Job* PopNextLocked();
  // Preempts the latest admitted background request to free a slot for a waiting interactive one,
  // giving what it computed to the tree first. Returns whether there was one.
  bool YieldBackgroundSlot();
  void ExpireQueued(int64_t now);
  void ExpireRunning(int64_t now);
  void Admit();
  // Gives `leader`'s context to the tree for the requests that share `prefixes` of it, each such
  // prefix first as a node of its own: a follower's lookup then ends on a node border and splits
  // (copies and hashes again) no edge.
  void InsertForFollowers(Job* leader, std::span<const size_t> prefixes);
  // A running request of `job`'s tenant whose context shares at least shared_prefix_wait_tokens
  // more tokens with `job` than the tree holds: admitting `job` now would compute them twice. Null
  // when none; else the leader and how many tokens they share.
  std::pair<Job*, size_t> PrefixLeader(const Job& job) const;
  std::vector<Planned> PlanBatch();
  void FitBudget(std::vector<Planned>& plan);
  // The running request memory pressure takes first: the latest admitted background one, else the
  // latest admitted.
  Job* PreemptionVictim() const;
  void Preempt(Job* job);
  // Gives each decoding request with a drafter a draft, within what is left of the step's `budget`.
  void PlanDrafts(std::vector<Planned>& plan, size_t& budget);
  void RunBatch(const std::vector<Planned>& plan);
  // An embedding request's start at admission: an empty cache of its own, a fresh pooler.
  LookupResult StartEmbedding(Job& job) const;
  // Pools an embedding request's rows of this step; finishes it with its embedding when `completes`.
  void PoolEmbedding(Job* job, std::span<const float> rows, bool completes);
  // How a request ends, when a token ends it.
  struct Ending {
    FinishReason reason;
    Status error = Status::Ok();
  };
  // Chooses, records and delivers `job`'s next token from `logits`.
  std::optional<Ending> Emit(Job* job, std::span<float> logits);
  // Emits from each row of a verified draft ([1 + draft][vocab]) while the generation chooses the
  // draft's tokens, then cuts the rest of the draft from the cache.
  std::optional<Ending> EmitVerified(Job* job, std::span<float> rows);
  // Where a callback's answer leaves its request.
  enum class Delivered { kContinue, kCancelled, kThrew };
  Delivered Deliver(Job* job, int32_t token, std::string_view text, const TokenLogprobs* logprobs);
  // Ends a running job: gives what it computed to the tree (when `to_tree`), publishes the result.
  void FinishRunning(Job* job, FinishReason reason, Status error = Status::Ok(), bool to_tree = true);
  void FinishLocked(Job* job, FinishReason reason, Status error);  // mu_ held; job not running
  void CancelEverything();
  // The tree's lookup of `job`'s context with its pager asked for what the tree lacks
  // (RadixTree::LookupOrPageIn: inserted into the tree), counted for the job. Blocks on the tier's I/O.
  LookupResult PageIn(Job& job);
  size_t SessionBytes() const;
  bool Fits(size_t extra_bytes) const;

  const Model& model_;
  const Tokenizer& tokenizer_;
  const EngineOptions options_;
  Env* const env_;
  std::unique_ptr<RadixTree> owned_tree_;
  RadixTree* const tree_;
  const size_t bytes_per_token_;
  // The tree spills to a tier or the engine pages from one.
  const bool tier_bound_ = tree_->pages_in() || tree_->spills();

  std::mutex step_mu_;
  std::vector<Job*> running_;  // in admission order
  uint64_t next_admission_ = 0;
  size_t prefill_turn_ = 0;  // rotates which tenant's prefill is planned first

  std::mutex deliver_mu_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::unordered_map<RequestId, std::unique_ptr<Job>> jobs_;  // unfinished, or finished and not yet collected
  internal::TenantQueues<Job*> queued_;      // interactive
  internal::TenantQueues<Job*> background_;  // admitted only while queued_ is empty
  size_t n_running_ = 0, n_background_running_ = 0;
  RequestId next_id_ = 1;
  bool accepting_ = true, stopping_ = false, draining_ = false;
  EngineStats stats_;

  mutable std::mutex vocabulary_mu_;
  // GUARDED_BY(vocabulary_mu_): by the sorted ids a reply spells (a model's families give few sets).
  mutable std::map<std::vector<int32_t>, std::shared_ptr<const TokenVocabulary>> vocabularies_;

  std::mutex shutdown_mu_;
  bool has_loop_ = false;  // set before any other thread sees the engine
  std::thread loop_;
};

// ---- submission, cancellation, results ----

Status Engine::Impl::Prepare(EngineRequest& request) const {
  if (request.messages.empty()) return Status::Ok();  // token ids: tools were rendered (or not) by the host
  if (!request.prompt.empty()) return InvalidArgument("Engine::Submit: both a prompt and messages; give one");
  if (!request.sources.empty()) return InvalidArgument("Engine::Submit: sources with messages; the engine computes them");
  const ChatTemplate* chat = options_.chat_template.get();
  if (chat == nullptr) return FailedPrecondition("Engine::Submit: messages need EngineOptions::chat_template");
  FAK_ASSIGN_OR_RETURN(internal::PreparedToolChat tools, internal::PrepareToolChat(*chat, request.messages, request.tools));
  std::shared_ptr<const TokenConstraint> constraint = request.constraint;
  // A marker the vocabulary holds as a special token decodes to nothing: the reply spells it, so
  // ToolCallReader sees the call, and the opening one triggers the call's grammar by its id too.
  std::vector<int32_t> spelled = request.spelled_tokens;
  int32_t trigger_token = -1;
  for (const std::string& marker : tools.markers) {
    const int32_t id = tokenizer_.FindToken(marker);
    if (id < 0) continue;  // not one token: written as text
    Result<std::string> text = tokenizer_.Decode(std::span<const int32_t>(&id, 1));
    if (!text || !text->empty()) continue;  // a token that shows its text already
    spelled.push_back(id);
    if (marker == tools.trigger) trigger_token = id;
  }
  if (!tools.forced_gbnf.empty()) {
    if (constraint != nullptr) return InvalidArgument("Engine::Submit: tool_choice required or named with a constraint; give one");
    FAK_ASSIGN_OR_RETURN(Grammar grammar, Grammar::Parse(tools.forced_gbnf));
    FAK_ASSIGN_OR_RETURN(std::shared_ptr<const TokenVocabulary> vocabulary, Vocabulary(spelled));
    constraint = std::make_shared<GrammarConstraint>(std::move(grammar), std::move(vocabulary));
  } else if (!tools.trigger.empty() && constraint == nullptr) {
    // auto: free text until the call marker, then the call held to the tools' schemas.
    FAK_ASSIGN_OR_RETURN(Grammar grammar, Grammar::Parse(tools.triggered_gbnf));
    FAK_ASSIGN_OR_RETURN(std::shared_ptr<const TokenVocabulary> vocabulary, Vocabulary(spelled));
    FAK_ASSIGN_OR_RETURN(constraint, TriggeredGrammarConstraint::Create(std::move(tools.trigger), std::move(grammar),
                                                                        std::move(vocabulary), trigger_token));
  }
  ChatRenderOptions render;
  render.tools_json = std::move(tools.prompt.tools_json);
  const std::vector<ChatMessage>& messages = tools.prompt.messages;
  FAK_ASSIGN_OR_RETURN(RenderedChat rendered, chat->Render(messages, render));
  // Message text is never markup: EncodeRendered turns only the template's own special-token texts
  // into their ids.
  FAK_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, EncodeRendered(tokenizer_, rendered));
  FAK_ASSIGN_OR_RETURN(std::vector<SourceSpan> sources, ChatSourceRuns(tokenizer_, rendered, messages, prompt));
  request.prompt = std::move(prompt);
  request.sources = std::move(sources);
  request.constraint = std::move(constraint);
  request.spelled_tokens = std::move(spelled);
  if (request.stop_tokens.empty()) request.stop_tokens = EndOfGenerationTokens(tokenizer_, chat);
  request.messages.clear();
  return Status::Ok();
}

Result<std::shared_ptr<const TokenVocabulary>> Engine::Impl::Vocabulary(std::vector<int32_t> spelled) const {
  std::sort(spelled.begin(), spelled.end());
  spelled.erase(std::unique(spelled.begin(), spelled.end()), spelled.end());
  std::lock_guard<std::mutex> lock(vocabulary_mu_);
  std::shared_ptr<const TokenVocabulary>& vocabulary = vocabularies_[spelled];
  if (vocabulary == nullptr) {
    FAK_ASSIGN_OR_RETURN(vocabulary, TokenVocabulary::Build(tokenizer_, spelled));
  }
  return vocabulary;
}

Result<RequestId> Engine::Impl::Submit(EngineRequest request) {
  if (!IsValidTenant(request.tenant)) return InvalidArgument("Engine::Submit: invalid tenant '" + request.tenant + "'");
  FAK_RETURN_IF_ERROR(Prepare(request));
  if (request.prompt.empty()) return InvalidArgument("Engine::Submit: empty prompt");
  if (request.embed) request.max_tokens = 0;  // nothing is generated: the prompt alone takes context and KV
  const size_t vocab = model_.config().vocab_size;
  for (size_t i = 0; i < request.prompt.size(); ++i) {
    if (request.prompt[i] < 0 || static_cast<size_t>(request.prompt[i]) >= vocab) {
      return InvalidArgument("Engine::Submit: prompt token " + std::to_string(request.prompt[i]) + " at index " +
                             std::to_string(i) + " is outside the vocabulary of " + std::to_string(vocab));
    }
  }
  for (size_t i = 0; i < request.sources.size(); ++i) {
    const SourceSpan& run = request.sources[i];
    if (run.n_tokens == 0 || run.from > request.prompt.size() || run.n_tokens > request.prompt.size() - run.from) {
      return InvalidArgument("Engine::Submit: source run " + std::to_string(i) + " [" + std::to_string(run.from) + ", +" +
                             std::to_string(run.n_tokens) + ") is empty or outside the prompt of " +
                             std::to_string(request.prompt.size()) + " tokens");
    }
  }
  std::vector<SourceSpan> sources = std::move(request.sources);
  FAK_RETURN_IF_ERROR(request.sampling.Validate().WithContext("Engine::Submit"));
  for (const auto& [id, bias] : request.sampling.logit_bias) {
    if (static_cast<size_t>(id) >= vocab)
      return InvalidArgument("Engine::Submit: logit_bias token " + std::to_string(id) + " is outside the vocabulary of " +
                             std::to_string(vocab));
  }
  if (request.top_logprobs > kMaxTopLogprobs)
    return InvalidArgument("Engine::Submit: top_logprobs " + std::to_string(request.top_logprobs) + " is over " +
                           std::to_string(kMaxTopLogprobs));
  // The cache never holds the last generated token: it is not fed back.
  const size_t limit = model_.config().context_length;
  const size_t context = request.prompt.size() + std::min(request.max_tokens, limit + 1);
  if (context - (request.max_tokens > 0 ? 1 : 0) > limit) {
    return ResourceExhausted("Engine::Submit: prompt (" + std::to_string(request.prompt.size()) + ") + max_tokens (" +
                             std::to_string(request.max_tokens) + ") exceeds the context length " +
                             std::to_string(model_.config().context_length));
  }
  if (options_.kv_budget_bytes != 0 && context * bytes_per_token_ > options_.kv_budget_bytes) {
    return ResourceExhausted("Engine::Submit: " + std::to_string(context) + " tokens of KV (" +
                             std::to_string(context * bytes_per_token_) + " bytes) exceed the KV budget of " +
                             std::to_string(options_.kv_budget_bytes) + " bytes");
  }
  FAK_ASSIGN_OR_RETURN(Generation generation, GenerationFor(request, tokenizer_));
  std::unique_ptr<Drafter> drafter;
  if (request.speculate && request.max_tokens > 1) {
    FAK_ASSIGN_OR_RETURN(drafter, NewDrafter(options_.speculation, model_));
  }
  auto job = std::make_unique<Job>(std::move(request), std::move(generation));
  job->drafter = std::move(drafter);
  job->sources = std::move(sources);
  job->result.timings.submitted_ns = env_->NowMonotonicNanos();
  if (tree_->pages_in() && !job->embeds()) {
    {
      // No tier I/O for a request that would be refused anyway.
      std::lock_guard<std::mutex> lock(mu_);
      if (!accepting_) return FailedPrecondition("Engine::Submit: the engine is shut down");
    }
    // On the caller's thread, so the step thread (and every running request's decode) does not wait
    // for the tier; the prefix waits in the tree for admission.
    if (tree_->MatchLength(job->context, job->request.tenant) + 1 < job->context.size()) {
      job->paged_prefix = PageIn(*job).matched_tokens;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!accepting_) return FailedPrecondition("Engine::Submit: the engine is shut down");
  if (queued_size() >= options_.max_queued) {
    return Unavailable("Engine::Submit: " + std::to_string(queued_size()) + " requests are waiting (max_queued); retry later");
  }
  if (options_.max_queued_per_tenant != 0 && !job->background()) {
    const size_t waiting = queued_.SizeOf(job->request.tenant);
    if (waiting >= options_.max_queued_per_tenant) {
      return Unavailable("Engine::Submit: tenant '" + job->request.tenant + "' has " + std::to_string(waiting) +
                         " requests waiting (max_queued_per_tenant); retry later");
    }
  }
  const RequestId id = job->id = next_id_++;
  LineOf(*job).PushBack(job->request.tenant, job.get());
  jobs_.emplace(id, std::move(job));
  work_cv_.notify_all();
  return id;
}

Status Engine::Impl::Cancel(RequestId id) {
  // Waiting for a callback in progress is what makes "no callback after Cancel returns" true.
  std::unique_lock<std::mutex> delivering;
  if (t_delivering_for != this) delivering = std::unique_lock<std::mutex>(deliver_mu_);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound("Engine::Cancel: no request " + std::to_string(id));
  Job* job = it->second.get();
  if (job->done) return Status::Ok();
  job->cancel_requested = true;
  if (LineOf(*job).Remove(job->request.tenant, job)) FinishLocked(job, FinishReason::kCancelled, Status::Ok());
  work_cv_.notify_all();
  return Status::Ok();
}

Result<EngineResult> Engine::Impl::Wait(RequestId id) {
  std::unique_lock<std::mutex> lock(mu_);
  auto find = [&]() -> Job* {
    auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : it->second.get();
  };
  if (find() == nullptr) return NotFound("Engine::Wait: no request " + std::to_string(id));
  if (has_loop_) {
    done_cv_.wait(lock, [&] { return find() == nullptr || find()->done; });
  } else {
    while (find() != nullptr && !find()->done) {
      lock.unlock();
      Step();
      lock.lock();
    }
  }
  Job* job = find();
  if (job == nullptr) return NotFound("Engine::Wait: request " + std::to_string(id) + " was collected by another Wait");
  EngineResult result = std::move(job->result);
  jobs_.erase(id);
  return result;
}

// ---- the step ----

bool Engine::Impl::Step() {
  {
    std::lock_guard<std::mutex> step(step_mu_);
    const int64_t now = env_->NowMonotonicNanos();
    ExpireQueued(now);
    ExpireRunning(now);
    Admit();
    std::vector<Planned> plan = PlanBatch();
    FitBudget(plan);
    if (!plan.empty()) RunBatch(plan);
    const size_t session_bytes = SessionBytes();
    std::lock_guard<std::mutex> lock(mu_);
    stats_.session_kv_bytes = session_bytes;
  }
  std::lock_guard<std::mutex> lock(mu_);
  return HasWorkLocked();
}

void Engine::Impl::ExpireQueued(int64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Job* job : QueuedItems()) {
    const bool late = job->request.deadline_ns != 0 && now >= job->request.deadline_ns;
    if (!late && !job->cancel_requested) continue;
    LineOf(*job).Remove(job->request.tenant, job);
    FinishLocked(job, late ? FinishReason::kDeadline : FinishReason::kCancelled, Status::Ok());
  }
}

void Engine::Impl::ExpireRunning(int64_t now) {
  for (Job* job : std::vector<Job*>(running_)) {
    if (job->cancel_requested) {
      FinishRunning(job, FinishReason::kCancelled);
    } else if (job->request.deadline_ns != 0 && now >= job->request.deadline_ns) {
      FinishRunning(job, FinishReason::kDeadline);
    }
  }
}

void Engine::Impl::Admit() {
  std::vector<Job*> held;  // waiting for a running request's prompt to reach the tree
  for (;;) {
    Job* job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if ((stopping_ && !draining_) || queued_size() == 0) break;
      if (running_.size() >= options_.max_running) {
        if (queued_.empty()) break;
        lock.unlock();
        if (!YieldBackgroundSlot()) break;
        lock.lock();
        if (queued_.empty()) break;  // cancelled meanwhile
      }
      job = PopNextLocked();
    }
    if (auto [leader, shared] = PrefixLeader(*job); leader) {
      if (leader->cache->size() < shared) {  // still reading them: wait for its prompt in the tree
        leader->followers_waiting = true;
        leader->follower_prefixes.push_back(shared);
        held.push_back(job);
        continue;
      }
      // It read them already (`job` came during that step, or while it decodes): into the tree now.
      InsertForFollowers(leader, {&shared, 1});
    }
    LookupResult found = job->embeds() ? StartEmbedding(*job) : tree_->Lookup(tree_->ClaimFor(job->request.tenant), job->context);
    // The tree gave back (budget eviction) a prefix Submit paged in: page it in again, on this thread.
    if (tree_->pages_in() && found.matched_tokens < job->paged_prefix) {
      found = PageIn(*job);
    }
    // Room for this step's chunk of every running request and of this one.
    size_t step_tokens = std::min(options_.prefill_chunk_tokens, job->context.size() - found.matched_tokens);
    for (const Job* other : running_) step_tokens += std::min(options_.prefill_chunk_tokens, other->Pending());
    const size_t step_bytes = step_tokens * bytes_per_token_;
    if (!Fits(step_bytes)) {
      const size_t wanted = SessionBytes() + step_bytes;
      tree_->EvictToBudget(options_.kv_budget_bytes > wanted ? options_.kv_budget_bytes - wanted : 0);
      // With nothing running it must go ahead: Submit checked that it fits alone.
      if (!Fits(step_bytes) && !running_.empty()) {
        held.push_back(job);
        break;
      }
    }
    if (job->admitted_before) {
      job->result.usage.recomputed_tokens +=
          job->computed_before_preemption - std::min(job->computed_before_preemption, found.matched_tokens);
    } else {
      job->result.usage.cached_tokens = found.matched_tokens;
      job->admitted_before = true;
    }
    job->cache.emplace(std::move(found.cache));
    job->lease = std::move(found.lease);
    job->admission = next_admission_++;
    running_.push_back(job);
    std::lock_guard<std::mutex> lock(mu_);
    ++n_running_;
    n_background_running_ += job->background() ? 1 : 0;
    ++stats_.admitted;
  }
  // Back at the front of their lines, in the order they were taken.
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = held.rbegin(); it != held.rend(); ++it) LineOf(**it).PushFront((*it)->request.tenant, *it);
}

std::vector<Job*> Engine::Impl::QueuedItems() const {
  std::vector<Job*> items = queued_.Items();
  const std::vector<Job*> background = background_.Items();
  items.insert(items.end(), background.begin(), background.end());
  return items;
}

Job* Engine::Impl::PopNextLocked() {
  internal::TenantQueues<Job*>& line = queued_.empty() ? background_ : queued_;
  const auto choose = [&](std::string_view tenant, const std::deque<Job*>& waiting) -> size_t {
    const size_t window = std::min(options_.cache_aware_window, waiting.size());
    // Put back or preempted (it has run before), or passed over enough: it goes next.
    if (window <= 1 || waiting.front()->admitted_before || waiting.front()->passed_over >= window) return 0;
    std::vector<std::span<const int32_t>> prompts;
    for (size_t i = 0; i < window; ++i) prompts.emplace_back(waiting[i]->context);
    const size_t pick = NextCacheAware(*tree_, prompts, tenant);
    for (size_t i = 0; i < pick; ++i) ++waiting[i]->passed_over;
    return pick;
  };
  return line.PopNext(choose);
}

bool Engine::Impl::YieldBackgroundSlot() {
  auto it = std::find_if(running_.rbegin(), running_.rend(), [](const Job* job) { return job->background(); });
  if (it == running_.rend()) return false;
  Job* job = *it;
  // Slot pressure, not memory pressure: keep what it computed (the tree may still evict it).
  if (!job->cache->empty() && !job->embeds()) (void)tree_->Insert(job->request.tenant, job->cache->tokens(), *job->cache, job->sources);
  Preempt(job);
  return true;
}

std::pair<Job*, size_t> Engine::Impl::PrefixLeader(const Job& job) const {
  if (options_.shared_prefix_wait_tokens == 0 || job.embeds()) return {nullptr, 0};
  const size_t in_tree = tree_->MatchLength(job.context, job.request.tenant);
  for (Job* other : running_) {
    if (other->request.tenant != job.request.tenant || other->embeds()) continue;  // an embedding's KV never reaches the tree
    const size_t shared = static_cast<size_t>(
        std::mismatch(job.context.begin(), job.context.end(), other->context.begin(), other->context.end()).first -
        job.context.begin());
    if (shared >= in_tree + options_.shared_prefix_wait_tokens) return {other, shared};
  }
  return {nullptr, 0};
}

std::vector<Planned> Engine::Impl::PlanBatch() {
  std::vector<Planned> plan;
  std::vector<Job*> prefilling, background_prefilling;
  size_t budget = options_.step_token_budget;  // >= max_running: every decode fits
  for (Job* job : running_) {
    if (job->Pending() == 1) {
      plan.push_back(PlanFor(job, 1));
      --budget;
    } else {
      (job->background() ? background_prefilling : prefilling).push_back(job);
    }
  }
  PlanDrafts(plan, budget);
  // Interactive prompts first; background ones get what is left of the step.
  const auto tenant_of = [](Job* job) -> std::string_view { return job->request.tenant; };
  const size_t turn = prefill_turn_++;
  for (const std::vector<Job*>* jobs : {&prefilling, &background_prefilling}) {
    for (Job* job : internal::RoundRobinByTenant(*jobs, tenant_of, turn)) {
      const size_t n = std::min({job->Pending(), options_.prefill_chunk_tokens, budget});
      if (n == 0) return plan;
      plan.push_back(PlanFor(job, n));
      budget -= n;
    }
  }
  return plan;
}

void Engine::Impl::PlanDrafts(std::vector<Planned>& plan, size_t& budget) {
  for (Planned& p : plan) {
    Job* job = p.job;
    job->draft.clear();
    // Only once it generates: a draft over the end of a prompt would put unchosen tokens' KV where
    // the prompt's insert into the tree reads the cache.
    if (job->drafter == nullptr || budget == 0 || job->context.size() == job->request.prompt.size()) continue;
    // Every token a verification returns must still be wanted: at most the tokens left, minus one.
    const size_t left = job->request.max_tokens - job->generation.tokens().size() - 1;
    const size_t most = std::min({options_.speculation.max_draft_tokens, left, budget});
    if (most == 0) continue;
    // A drafter that fails costs its draft only.
    Result<std::vector<int32_t>> draft = job->drafter->Propose(job->context, most);
    if (!draft.has_value()) continue;
    job->draft = std::move(*draft);
    job->draft.resize(std::min(job->draft.size(), most));
    p.n += job->draft.size();
    budget -= job->draft.size();
  }
}

void Engine::Impl::FitBudget(std::vector<Planned>& plan) {
  if (options_.kv_budget_bytes == 0) return;
  const auto growth = [&] {
    size_t tokens = 0;
    for (const Planned& p : plan) tokens += p.n;
    return tokens * bytes_per_token_;
  };
  while (!Fits(growth())) {
    const size_t wanted = SessionBytes() + growth();
    tree_->EvictToBudget(options_.kv_budget_bytes > wanted ? options_.kv_budget_bytes - wanted : 0);
    // The last running request fits alone (Submit checked), once the tree has given back its tokens.
    if (Fits(growth()) || running_.size() <= 1) return;
    Job* victim = PreemptionVictim();
    std::erase_if(plan, [&](const Planned& p) { return p.job == victim; });
    Preempt(victim);
  }
}

Job* Engine::Impl::PreemptionVictim() const {
  auto it = std::find_if(running_.rbegin(), running_.rend(), [](const Job* job) { return job->background(); });
  return it != running_.rend() ? *it : running_.back();
}

void Engine::Impl::Preempt(Job* job) {
  // The text is the source: dropping the cache loses nothing the context cannot rebuild exactly.
  job->computed_before_preemption = job->cache->size();
  job->cache.reset();
  job->draft.clear();
  job->lease = Lease();
  std::erase(running_, job);
  ++job->result.usage.preemptions;
  std::lock_guard<std::mutex> lock(mu_);
  --n_running_;
  n_background_running_ -= job->background() ? 1 : 0;
  ++stats_.preemptions;
  LineOf(*job).PushFront(job->request.tenant, job);
}

void Engine::Impl::RunBatch(const std::vector<Planned>& plan) {
  std::vector<BatchItem> items;
  std::vector<std::vector<int32_t>> drafted(plan.size());  // [last token, draft...] of the requests with a draft
  size_t chunks = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const Planned& p = plan[i];
    std::span<const int32_t> tokens = std::span<const int32_t>(p.job->context).subspan(p.job->cache->size());
    LogitsMode mode = p.completes && !p.job->warm_only() ? LogitsMode::kLast : LogitsMode::kNone;
    if (p.job->embeds()) mode = LogitsMode::kHidden;
    if (!p.job->draft.empty()) {
      drafted[i] = {p.job->context.back()};
      drafted[i].insert(drafted[i].end(), p.job->draft.begin(), p.job->draft.end());
      tokens = drafted[i];
      mode = LogitsMode::kAll;
    }
    items.push_back({&*p.job->cache, tokens.first(p.n), mode});
    chunks += p.completes ? 0 : 1;
  }
  Result<std::vector<std::vector<float>>> logits = model_.PrefillBatch(items);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.steps;
    stats_.batch_items += plan.size();
    stats_.max_batch_items = std::max(stats_.max_batch_items, plan.size());
    stats_.prefill_chunks += chunks;
  }
  if (!logits.has_value()) {
    for (const Planned& p : plan) FinishRunning(p.job, FinishReason::kError, logits.error(), /*to_tree=*/false);
    return;
  }
  for (size_t i = 0; i < plan.size(); ++i) {
    if (plan[i].job->embeds()) {
      PoolEmbedding(plan[i].job, (*logits)[i], plan[i].completes);
      continue;
    }
    if (!plan[i].completes) continue;
    Job* job = plan[i].job;
    if (job->warm_only()) {
      FinishRunning(job, FinishReason::kLength);  // its prompt is read: the KV goes to the tree
      continue;
    }
    // A tier finds a slab by the digest of the context up to the slab's end, so a node that ends
    // past the prompt (prompt + reply, inserted at the end) can never serve the same prompt again:
    // with a tier, the prompt is inserted as read, so a node ends where it ends.
    const bool prompt_node = tier_bound_ && !job->prompt_in_tree && job->cache->size() == job->request.prompt.size();
    if (job->followers_waiting || prompt_node) {
      // Its prompt is read: give it to the tree now, not at the end, so the requests waiting for it
      // start from it at the next step.
      InsertForFollowers(job, job->follower_prefixes);
      job->followers_waiting = false;
      job->follower_prefixes.clear();
      job->prompt_in_tree = true;
    }
    const std::optional<Ending> end = job->draft.empty() ? Emit(job, (*logits)[i]) : EmitVerified(job, (*logits)[i]);
    if (end) FinishRunning(job, end->reason, end->error);
  }
}

void Engine::Impl::InsertForFollowers(Job* leader, std::span<const size_t> prefixes) {
  const std::span<const int32_t> tokens = leader->cache->tokens();
  std::vector<size_t> ends(prefixes.begin(), prefixes.end());
  std::sort(ends.begin(), ends.end());
  for (size_t end : ends) {
    end = std::min(end, tokens.size());
    // Only where the tree holds less: a node border inside an edge it has would be a split too.
    if (end == 0 || tree_->MatchLength(tokens.first(end), leader->request.tenant) == end) continue;
    (void)tree_->Insert(leader->request.tenant, tokens.first(end), *leader->cache, leader->sources);
  }
  (void)tree_->Insert(leader->request.tenant, tokens, *leader->cache, leader->sources);
}

LookupResult Engine::Impl::StartEmbedding(Job& job) const {
  job.pooler.emplace(*job.request.embed, model_.config().hidden_size);
  return LookupResult{model_.NewCache(), 0, ClaimVerdict{}, 0, Lease()};
}

void Engine::Impl::PoolEmbedding(Job* job, std::span<const float> rows, bool completes) {
  job->pooler->Add(rows);
  if (!completes) return;
  Result<std::vector<float>> embedding = job->pooler->Finish();
  if (!embedding) return FinishRunning(job, FinishReason::kError, embedding.error(), /*to_tree=*/false);
  job->result.embedding = std::move(*embedding);
  FinishRunning(job, FinishReason::kStopToken, Status::Ok(), /*to_tree=*/false);
}

std::optional<Engine::Impl::Ending> Engine::Impl::EmitVerified(Job* job, std::span<float> rows) {
  const std::vector<int32_t> draft = std::move(job->draft);
  job->draft.clear();
  const size_t vocab = rows.size() / (draft.size() + 1);
  // Row i follows draft[i - 1]: the generation's choice from it is exact while it chose the draft.
  size_t row = 0;
  std::optional<Ending> end;
  for (;; ++row) {
    end = Emit(job, rows.subspan(row * vocab, vocab));
    if (end || row == draft.size() || job->context.back() != draft[row]) break;
  }
  RequestUsage& usage = job->result.usage;
  usage.draft_tokens += draft.size();
  usage.accepted_draft_tokens += row;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.drafts;
    stats_.draft_tokens += draft.size();
    stats_.accepted_draft_tokens += row;
  }
  // The cache holds every draft token; those the generation did not choose go (own rows: exact).
  const Status cut = job->cache->Truncate(job->cache->size() - (draft.size() - row));
  if (!cut.ok()) return Ending{FinishReason::kError, cut};
  return end;
}

std::optional<Engine::Impl::Ending> Engine::Impl::Emit(Job* job, std::span<float> logits) {
  EngineResult& r = job->result;
  // Log-probabilities are the model's own distribution (docs/engine.md, Sampling): a constraint
  // masks `logits` in Step, so they are then taken from a copy made before.
  std::vector<float> unmasked;
  if (job->request.logprobs && job->request.constraint) unmasked.assign(logits.begin(), logits.end());
  Result<GenerationStep> stepped = job->generation.Step(logits, job->context);
  // Logits the sampler refuses (the model checks its own: not expected).
  if (!stepped) return Ending{FinishReason::kError, stepped.error()};
  const GenerationStep& step = *stepped;
  if (job->request.logprobs)
    r.logprobs.push_back(LogprobsOf(unmasked.empty() ? std::span<const float>(logits) : std::span<const float>(unmasked), step.token,
                                    job->request.top_logprobs));
  if (job->request.record_logits) r.logits.emplace_back(logits.begin(), logits.end());
  job->context.push_back(step.token);
  r.tokens.push_back(step.token);
  r.usage.generated_tokens = r.tokens.size();
  const int64_t now = env_->NowMonotonicNanos();
  if (r.timings.token_ns.empty()) r.timings.first_token_ns = now;
  r.timings.token_ns.push_back(now);

  switch (Deliver(job, step.token, step.text, job->request.logprobs ? &r.logprobs.back() : nullptr)) {
    case Delivered::kContinue:
      if (step.finish) return Ending{*step.finish};
      return std::nullopt;
    case Delivered::kCancelled:
      return Ending{job->generation.Cancel()};
    case Delivered::kThrew:
      return Ending{FinishReason::kError, InvalidArgument("the token callback threw an exception")};
  }
  return std::nullopt;
}

Engine::Impl::Delivered Engine::Impl::Deliver(Job* job, int32_t token, std::string_view text,
                                              const TokenLogprobs* logprobs) {
  std::lock_guard<std::mutex> lock(deliver_mu_);
  if (job->cancel_requested) return Delivered::kCancelled;
  if (!job->request.on_token) return Delivered::kContinue;
  t_delivering_for = this;
  Delivered out = Delivered::kContinue;
  try {
    if (!job->request.on_token(TokenEvent{job->id, token, text, logprobs})) out = Delivered::kCancelled;
  } catch (...) {
    out = Delivered::kThrew;  // nothing throws across the API: the request ends in error instead
  }
  t_delivering_for = nullptr;
  return out;
}

void Engine::Impl::FinishRunning(Job* job, FinishReason reason, Status error, bool to_tree) {
  if (to_tree && !job->cache->empty() && !job->embeds()) {
    // Reuse is an optimisation: a context the tree refuses is simply not reused.
    (void)tree_->Insert(job->request.tenant, job->cache->tokens(), *job->cache, job->sources);
  }
  job->cache.reset();
  job->lease = Lease();
  job->drafter.reset();  // a draft model's cache
  std::erase(running_, job);
  if (options_.kv_budget_bytes != 0) {
    const size_t sessions = SessionBytes();
    tree_->EvictToBudget(options_.kv_budget_bytes > sessions ? options_.kv_budget_bytes - sessions : 0);
  }
  std::lock_guard<std::mutex> lock(mu_);
  --n_running_;
  n_background_running_ -= job->background() ? 1 : 0;
  FinishLocked(job, reason, std::move(error));
}

void Engine::Impl::FinishLocked(Job* job, FinishReason reason, Status error) {
  EngineResult& r = job->result;
  r.finish = reason;
  r.error = std::move(error);
  r.text = job->generation.text();
  r.timings.finished_ns = env_->NowMonotonicNanos();
  job->done = true;
  ++stats_.finished;
  done_cv_.notify_all();
}

LookupResult Engine::Impl::PageIn(Job& job) {
  PagedPrefix paged;
  LookupResult lookup = tree_->LookupOrPageIn(tree_->ClaimFor(job.request.tenant), job.context, job.sources, &paged);
  if (!paged.asked) return lookup;
  job.result.usage.paged_tokens += paged.paged_tokens;
  ++job.result.usage.page_ins;
  job.result.usage.page_in_failure = paged.failure;
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.page_ins;
  stats_.paged_tokens += paged.paged_tokens;
  ++stats_.page_in_failures[static_cast<int>(paged.failure)];
  stats_.page_in_refusals += IsPageInRefusal(paged.failure) ? 1 : 0;
  return lookup;
}

size_t Engine::Impl::SessionBytes() const {
  size_t tokens = 0;
  for (const Job* job : running_) tokens += job->cache->size() - job->cache->shared_tokens();
  return tokens * bytes_per_token_;
}

bool Engine::Impl::Fits(size_t extra_bytes) const {
  if (options_.kv_budget_bytes == 0) return true;
  return tree_->Stats().resident_bytes + SessionBytes() + extra_bytes <= options_.kv_budget_bytes;
}

// ---- the thread and shutdown ----

void Engine::Impl::RunLoop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stopping_ || HasWorkLocked(); });
      if (stopping_ && (!draining_ || !HasWorkLocked())) return;
    }
    Step();
  }
}

void Engine::Impl::Shutdown(ShutdownMode mode) {
  std::lock_guard<std::mutex> once(shutdown_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    accepting_ = false;
    stopping_ = true;
    draining_ = mode == ShutdownMode::kDrain;
    work_cv_.notify_all();
  }
  if (loop_.joinable()) {
    loop_.join();
  } else if (mode == ShutdownMode::kDrain) {
    while (Step()) {
    }
  }
  CancelEverything();
}

void Engine::Impl::CancelEverything() {
  std::lock_guard<std::mutex> step(step_mu_);
  for (Job* job : std::vector<Job*>(running_)) FinishRunning(job, FinishReason::kCancelled, Status::Ok(), /*to_tree=*/false);
  std::lock_guard<std::mutex> lock(mu_);
  for (Job* job : QueuedItems()) {
    LineOf(*job).Remove(job->request.tenant, job);
    FinishLocked(job, FinishReason::kCancelled, Status::Ok());
  }
}

EngineStats Engine::Impl::Stats() const {
  EngineStats s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = stats_;
    s.queued = queued_size();
    s.running = n_running_;
    s.background_queued = background_.size();
    s.background_running = n_background_running_;
  }
  s.tree_kv_bytes = tree_->Stats().resident_bytes;
  return s;
}

// ---- Engine ----

Result<std::unique_ptr<Engine>> Engine::Create(const Model& model, const Tokenizer& tokenizer, EngineOptions options) {
  if (options.max_running == 0) return InvalidArgument("EngineOptions.max_running is 0");
  if (options.max_queued == 0) return InvalidArgument("EngineOptions.max_queued is 0");
  if (options.prefill_chunk_tokens == 0) return InvalidArgument("EngineOptions.prefill_chunk_tokens is 0");
  if (options.step_token_budget < options.max_running) {
    return InvalidArgument("EngineOptions.step_token_budget (" + std::to_string(options.step_token_budget) +
                           ") is below max_running (" + std::to_string(options.max_running) +
                           "): every running request's decode must fit in a step");
  }
  if (options.tree != nullptr && options.pager != nullptr) {
    return InvalidArgument("EngineOptions.pager with EngineOptions.tree: give that tree its pager (RadixTree::SetPager)");
  }
  FAK_RETURN_IF_ERROR(options.speculation.Validate(model).WithContext("EngineOptions.speculation"));
  const bool start_thread = options.start_thread;
  std::unique_ptr<Engine> engine(new Engine(std::make_unique<Impl>(model, tokenizer, std::move(options))));
  if (start_thread) {
    Impl* impl = engine->impl_.get();
    impl->has_loop_ = true;
    impl->loop_ = std::thread([impl] { impl->RunLoop(); });
  }
  return engine;
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() { Shutdown(ShutdownMode::kCancel); }

Status Engine::Prepare(EngineRequest& request) const { return impl_->Prepare(request); }
Result<RequestId> Engine::Submit(EngineRequest request) { return impl_->Submit(std::move(request)); }
Status Engine::Cancel(RequestId id) { return impl_->Cancel(id); }
Result<EngineResult> Engine::Wait(RequestId id) { return impl_->Wait(id); }
bool Engine::Step() { return impl_->Step(); }
void Engine::Shutdown(ShutdownMode mode) { impl_->Shutdown(mode); }
EngineStats Engine::Stats() const { return impl_->Stats(); }
RadixTree& Engine::tree() { return *impl_->tree_; }
const ChatTemplate* Engine::chat_template() const { return impl_->options_.chat_template.get(); }
Result<std::shared_ptr<const TokenVocabulary>> Engine::Vocabulary() const { return impl_->Vocabulary(); }

std::vector<Result<EngineResult>> WaitUnlessCancelled(Engine& engine, std::span<const RequestId> ids,
                                                      const std::function<bool()>& cancelled) {
  constexpr auto kPoll = std::chrono::milliseconds(20);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread watcher([&] {
    std::unique_lock<std::mutex> lock(mu);
    while (!cv.wait_for(lock, kPoll, [&] { return done; })) {
      if (cancelled()) {
        for (RequestId id : ids) (void)engine.Cancel(id);  // NotFound for one already collected
        return;
      }
    }
  });
  std::vector<Result<EngineResult>> results;
  results.reserve(ids.size());
  for (RequestId id : ids) results.push_back(engine.Wait(id));
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  watcher.join();
  return results;
}

}  // namespace fak
