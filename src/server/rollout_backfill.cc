// The rollout backfill as background engine requests: screening before anything is queued, a
// bounded window of requests in flight, late seals, and the check of the warmed KV before cutover.
#include "src/server/rollout_backfill.h"

#include <algorithm>
#include <span>
#include <utility>

#include "fak/regen/regime_oracle.h"

namespace fak::internal {

namespace {

std::string ShortHex(const Digest& d) { return d.Hex().substr(0, 16); }

// `messages` as a prefill-only background request, rendered as the live chat request for the same
// messages is (Engine::Prepare).
Status PrepareRequest(const Engine& engine, const std::string& tenant, const std::vector<ChatMessage>& messages,
                      EngineRequest* out) {
  EngineRequest r;
  r.tenant = tenant;
  r.messages = messages;
  r.max_tokens = 0;  // prefill only: the prompt's KV goes to the tree
  r.priority = RequestPriority::kBackground;
  FAK_RETURN_IF_ERROR(engine.Prepare(r));
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace

EngineBackfill::EngineBackfill(Engine& engine, const Model& model, const ScreenChain& chain, std::vector<HeldChat> chats,
                               EngineBackfillOptions options)
    : engine_(engine), model_(model), chain_(chain), options_(options) {
  for (HeldChat& chat : chats) {
    std::string id = chat.ref.session;
    chats_.emplace(std::move(id), std::move(chat));
  }
}

EngineBackfill::~EngineBackfill() { Stop(); }

Status EngineBackfill::SealLate(Item& item) {
  bool changed = false;
  for (size_t k = 0; k < item.unsealed.size();) {
    Result<bool> listed = IsSealedFor(chain_.denylist(), item.request.tenant, item.unsealed[k]);
    if (!listed.has_value()) {
      return Unavailable("message " + std::to_string(item.unsealed_index[k]) + ": the denylist cannot be asked now: " +
                         listed.error().ToString());
    }
    if (*listed) {  // sealed since the hot set was taken: the live request would run its stub
      item.messages[item.unsealed_index[k]].content = Planner::SealedStub(item.unsealed[k]);
      item.unsealed.erase(item.unsealed.begin() + static_cast<std::ptrdiff_t>(k));
      item.unsealed_index.erase(item.unsealed_index.begin() + static_cast<std::ptrdiff_t>(k));
      changed = true;
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.sealed_meanwhile;
      continue;
    }
    ++k;
  }
  if (changed || item.request.prompt.empty()) return PrepareRequest(engine_, item.request.tenant, item.messages, &item.request);
  return Status::Ok();
}

Result<bool> EngineBackfill::Submit(const HotSetTracker::Entry& entry, std::function<void()> finished) {
  const auto it = chats_.find(entry.transcript.session);
  if (it == chats_.end()) return NotFound("backfill: no conversation '" + entry.transcript.session + "'");
  const HeldChat& chat = it->second;
  Item item;
  item.session = chat.ref.session;
  item.messages = chat.messages;
  item.request.tenant = chat.ref.tenant;
  for (size_t i = 0; i < chat.messages.size(); ++i) {
    if (i < chat.sealed.size() && chat.sealed[i]) continue;
    item.unsealed.push_back(Digest::Of(chat.messages[i].content));
    item.unsealed_index.push_back(i);
  }
  FAK_RETURN_IF_ERROR(SealLate(item));
  // What is still sent as it is passes the chain now (a stricter policy re-judges old text): a
  // text it quarantines is never prefilled, so the whole conversation is left cold.
  for (size_t k = 0; k < item.unsealed.size(); ++k) {
    const size_t i = item.unsealed_index[k];
    const SegmentKind kind = i < chat.kinds.size() ? chat.kinds[i] : SegmentKind::kUser;
    const Verdict v = chain_.Screen(ScreenInput{item.messages[i].content, kind, item.unsealed[k]});
    const std::string which = "message " + std::to_string(i) + " (" + ShortHex(item.unsealed[k]) + ")";
    if (v.unavailable()) return Unavailable("backfill: " + which + " cannot be screened now: " + v.detector + ": " + v.reason);
    if (v.quarantined()) return FailedPrecondition("backfill refused: " + which + " quarantined by " + v.detector + ": " + v.reason);
  }
  const std::vector<int32_t>& prompt = item.request.prompt;
  // A lookup always leaves the last token to compute: resident up to it is all a request can reuse.
  if (engine_.tree().MatchLength(prompt, item.request.tenant) + 1 >= prompt.size()) return false;
  item.finished = std::move(finished);
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(item));
  ++stats_.queued;
  return true;
}

Status EngineBackfill::Start(std::function<void()> when_done) {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stats_.begin_ns != 0) return FailedPrecondition("EngineBackfill::Start: started already");
  stats_.running = true;
  stats_.begin_ns = Env::Default()->NowMonotonicNanos();
  thread_ = std::thread([this, when_done = std::move(when_done)]() mutable { Run(std::move(when_done)); });
  return Status::Ok();
}

void EngineBackfill::Stop() {
  std::vector<RequestId> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    ids = in_flight_ids_;
  }
  for (RequestId id : ids) (void)engine_.Cancel(id);  // finished at the latest after the step in progress
  if (thread_.joinable()) thread_.join();
  std::deque<Item> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dropped.swap(queue_);
    stats_.queued = 0;
    stats_.running = false;
  }
  for (Item& item : dropped) {
    if (item.finished) std::exchange(item.finished, nullptr)();
  }
}

void EngineBackfill::Finish(Item& item, bool ok) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++(ok ? stats_.finished : stats_.failed);
    if (ok) done_.emplace_back(item.request.tenant, item.request.prompt);
  }
  if (item.finished) std::exchange(item.finished, nullptr)();
}

void EngineBackfill::Run(std::function<void()> when_done) {
  std::deque<InFlight> in_flight;
  for (;;) {
    // Tops the window up; the engine queues and batches them with its other work.
    for (;;) {
      Item item;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_ || queue_.empty() || in_flight.size() >= std::max<size_t>(1, options_.max_in_flight)) break;
        item = std::move(queue_.front());
        queue_.pop_front();
        --stats_.queued;
      }
      if (!SealLate(item).ok()) {  // the denylist cannot be asked: fail closed, nothing prefilled
        Finish(item, false);
        continue;
      }
      Result<RequestId> id = engine_.Submit(item.request);  // a copy: the tokens stay for Verify
      if (!id.has_value()) {
        Finish(item, false);
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.submitted;
        in_flight_ids_.push_back(*id);
      }
      in_flight.push_back(InFlight{*id, std::move(item)});
    }
    if (in_flight.empty()) break;
    InFlight f = std::move(in_flight.front());
    in_flight.pop_front();
    Result<EngineResult> result = engine_.Wait(f.id);
    bool ok = result.has_value() && result->finish == FinishReason::kLength && result->error.ok();
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::erase(in_flight_ids_, f.id);
      if (ok) {
        stats_.prompt_tokens += result->usage.prompt_tokens;
        stats_.cached_tokens += result->usage.cached_tokens;
        stats_.prefilled_tokens += result->usage.prompt_tokens - std::min(result->usage.prompt_tokens, result->usage.cached_tokens);
      }
    }
    // A text sealed while its request ran (its KV was inserted after the seal swept the trees):
    // evicted here, and the context is not offered to Verify.
    for (const Digest& d : f.item.unsealed) {
      Result<bool> listed = IsSealedFor(chain_.denylist(), f.item.request.tenant, d);
      if (!listed.has_value() || *listed) {
        (void)engine_.tree().EvictSource(d, f.item.request.tenant);
        std::lock_guard<std::mutex> lock(mu_);
        stats_.sealed_meanwhile += listed.has_value() ? 1 : 0;
        ok = false;
      }
    }
    Finish(f.item, ok);
  }
  bool stopped = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.running = false;
    stats_.end_ns = Env::Default()->NowMonotonicNanos();
    stopped = stopping_;
  }
  if (!stopped && when_done) when_done();
}

Status EngineBackfill::Verify() {
  std::vector<std::pair<std::string, std::vector<int32_t>>> contexts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    contexts = done_;
  }
  if (contexts.empty()) return Status::Ok();  // nothing was backfilled: nothing to check
  // Spread over the set: evenly spaced first, then the rest, until verify_samples were checked.
  std::vector<size_t> order;
  const size_t n = contexts.size(), want = std::max<size_t>(1, options_.verify_samples);
  for (size_t k = 0; k < std::min(n, want); ++k) order.push_back(k * n / std::min(n, want));
  for (size_t i = 0; i < n; ++i)
    if (std::find(order.begin(), order.end(), i) == order.end()) order.push_back(i);
  RadixTree& tree = engine_.tree();
  size_t checked = 0, equal = 0;
  Status first_failure;
  for (size_t i : order) {
    if (checked == want) break;
    const auto& [tenant, tokens] = contexts[i];
    LookupResult found = tree.Lookup(tree.ClaimFor(tenant), tokens);
    if (found.matched_tokens == 0 || found.matched_tokens + 1 < tokens.size()) continue;  // evicted since: not checkable
    ++checked;
    const std::span<const int32_t> prefix = std::span<const int32_t>(tokens).first(found.matched_tokens);
    Status same = VerifyRegenerated(model_, found.cache, prefix);
    if (same.ok()) {
      ++equal;
    } else if (first_failure.ok()) {
      first_failure = same.WithContext("backfilled context " + std::to_string(i) + " (tenant " + tenant + ")");
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.verify_samples = checked;
    stats_.verified = equal;
    if (!first_failure.ok()) stats_.verify_error = first_failure.ToString();
  }
  if (!first_failure.ok()) return first_failure;
  if (checked == 0) return FailedPrecondition("no backfilled context is resident any more to check (the KV budget evicted them)");
  return Status::Ok();
}

EngineBackfillStats EngineBackfill::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineBackfillStats s = stats_;
  s.in_flight = in_flight_ids_.size();
  return s;
}

}  // namespace fak::internal
