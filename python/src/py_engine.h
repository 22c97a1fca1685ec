// The C++ objects behind fak.Engine and fak.Request: the serving engine for concurrent requests from
// Python threads, with token streams that wait without the GIL.
#ifndef FAK_PYTHON_PY_ENGINE_H_
#define FAK_PYTHON_PY_ENGINE_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bindings.h"

namespace fak::python {

// What a request's waiter thread and (when streaming) the engine's step thread hand the Python side:
// its tokens as they come, then its result.
struct TokenQueue {
  bool stream = false;  // whether tokens are queued (set before submission)
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<int32_t, std::string>> events;  // GUARDED_BY(mu)
  std::optional<Result<EngineResult>> result;          // GUARDED_BY(mu); set once, when finished
};

class PyEngine;

// A directory KV tier an engine writes its tree's nodes through to and pages prompt prefixes in
// from (fak.Engine(kv_tier_dir=...)). Owned by the PyEngine, destroyed after its engine.
struct EngineKVTier {
  std::unique_ptr<KVTierStore> store;
  std::unique_ptr<TierSpiller> spiller;
  AccessPolicy access;  // the engine tree's (the default: tenant-only spans)
  std::unique_ptr<TierPager> pager;
};

// One submitted request. Waits take a timeout so that the binding can check for Ctrl-C between
// them; the result is handed over once and kept.
class PyRequest {
 public:
  PyRequest(std::shared_ptr<void> keep, PyEngine* engine, RequestId id, std::shared_ptr<TokenQueue> queue)
      : keep_(std::move(keep)), engine_(engine), id_(id), queue_(std::move(queue)) {}
  RequestId id() const { return id_; }
  bool streaming() const { return queue_->stream; }
  // Whether the request finished within `timeout` (call without the GIL).
  bool WaitFor(std::chrono::milliseconds timeout);
  // The result of a finished request; raises its error, if it failed.
  const EngineResult& result() const;
  enum class Next { kEvent, kFinished, kTimeout };
  // The next streamed (token, text) into *event; kFinished once the request ended and all were taken.
  Next NextEvent(std::chrono::milliseconds timeout, std::pair<int32_t, std::string>* event);
  Status Cancel();

 private:
  std::shared_ptr<void> keep_;  // the engine (user-made) or the model (its default engine): alive while we are
  PyEngine* engine_;
  RequestId id_;
  std::shared_ptr<TokenQueue> queue_;
  std::optional<Result<EngineResult>> result_;  // taken from queue_ once finished
};

// fak::Engine with its step thread, over a model it keeps alive (or, for a model's default engine,
// that owns it). Each request gets one waiter thread, which hands the result to its queue.
class PyEngine : public std::enable_shared_from_this<PyEngine> {
 public:
  // `keep` holds the model for a user-made engine; null for ModelHandle::DefaultEngine.
  // With `tier`, the engine's tree writes through to it and the engine pages from it.
  PyEngine(ModelHandle* model, ModelRef keep, EngineOptions options, std::unique_ptr<EngineKVTier> tier = nullptr);
  ~PyEngine();  // Shutdown(kCancel), then joins the waiters

  Result<RequestId> Submit(EngineRequest request, const std::shared_ptr<TokenQueue>& queue);
  Result<EngineResult> Wait(RequestId id) { return engine_->Wait(id); }
  Status Cancel(RequestId id) { return engine_->Cancel(id); }
  void Shutdown(bool drain);
  // Waits until what the tree offered the KV tier so far is on disk (no-op without a tier).
  void FlushTier() {
    if (tier_) tier_->spiller->Flush();
  }
  Engine& engine() { return *engine_; }
  ModelHandle& model() { return *model_; }

 private:
  void ReapWaiters();  // REQUIRES(waiters_mu_)

  ModelHandle* model_;
  ModelRef keep_;
  std::unique_ptr<EngineKVTier> tier_;  // before engine_: its tree offers to the spiller until destroyed
  std::unique_ptr<Engine> engine_;
  std::mutex waiters_mu_;
  std::vector<std::pair<std::shared_ptr<TokenQueue>, std::thread>> waiters_;  // GUARDED_BY(waiters_mu_)
};

}  // namespace fak::python

#endif  // FAK_PYTHON_PY_ENGINE_H_
