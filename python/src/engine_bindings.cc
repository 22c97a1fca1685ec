// fak.Engine (continuous batching over concurrent requests, radix-tree prefix reuse, gate
// statistics) and fak.Request (wait, cancel, stream tokens), all waiting without the GIL.
#include <algorithm>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "py_engine.h"
#include "fak/grammar/tool_calls.h"
#include "fak/model/embedding.h"

namespace fak::python {

// ---- PyEngine ----

PyEngine::PyEngine(ModelHandle* model, ModelRef keep, EngineOptions options, std::unique_ptr<EngineKVTier> tier)
    : model_(model), keep_(std::move(keep)), tier_(std::move(tier)) {
  options.chat_template = model_->chat_template;
  if (tier_) {
    // Write-through: every node the tree adds is queued for the tier, so another engine (or this
    // process after a restart) over the same directory finds it without a checkpoint.
    options.tree_options.access = tier_->access;
    options.tree_options.spill = tier_->spiller.get();
    options.tree_options.write_through = true;
    options.pager = tier_->pager.get();
  }
  engine_ = ValueOrThrow(Engine::Create(*model_->model, model_->RequireTokenizer(), std::move(options)));
}

PyEngine::~PyEngine() {
  Shutdown(/*drain=*/false);
  engine_.reset();
}

Result<RequestId> PyEngine::Submit(EngineRequest request, const std::shared_ptr<TokenQueue>& queue) {
  if (queue->stream) {
    request.on_token = [queue](const TokenEvent& event) {
      {
        std::lock_guard lock(queue->mu);
        queue->events.emplace_back(event.token, std::string(event.text));
      }
      queue->cv.notify_all();
      return true;
    };
  }
  FAK_ASSIGN_OR_RETURN(RequestId id, engine_->Submit(std::move(request)));
  {
    std::lock_guard lock(waiters_mu_);
    ReapWaiters();
    Engine* engine = engine_.get();
    waiters_.emplace_back(queue, std::thread([engine, queue, id] {
                            Result<EngineResult> result = engine->Wait(id);
                            {
                              std::lock_guard lock(queue->mu);
                              queue->result.emplace(std::move(result));
                            }
                            queue->cv.notify_all();
                          }));
  }
  return id;
}

void PyEngine::ReapWaiters() {
  for (size_t i = 0; i < waiters_.size();) {
    bool done;
    {
      std::lock_guard lock(waiters_[i].first->mu);
      done = waiters_[i].first->result.has_value();
    }
    if (!done) {
      ++i;
      continue;
    }
    waiters_[i].second.join();
    waiters_.erase(waiters_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

void PyEngine::Shutdown(bool drain) {
  engine_->Shutdown(drain ? ShutdownMode::kDrain : ShutdownMode::kCancel);
  std::lock_guard lock(waiters_mu_);
  for (auto& [queue, thread] : waiters_) thread.join();
  waiters_.clear();
  // What the tree offered is on disk when shutdown returns (a lost write is only a recompute later).
  FlushTier();
}

PyEngine& ModelHandle::DefaultEngine() {
  std::lock_guard lock(engine_mu_);
  if (!default_engine_) default_engine_ = std::make_unique<PyEngine>(this, nullptr, EngineOptions{});
  return *default_engine_;
}

ModelHandle::ModelHandle(LoadedModel loaded) : LoadedModel(std::move(loaded)) {}

Result<std::shared_ptr<const TokenVocabulary>> ModelHandle::Vocabulary() const {
  std::lock_guard lock(vocabulary_mu_);
  if (vocabulary_ == nullptr) {
    if (tokenizer == nullptr) return FailedPrecondition("grammar: model " + label + " has no tokenizer");
    FAK_ASSIGN_OR_RETURN(vocabulary_, TokenVocabulary::Build(*tokenizer));
  }
  return vocabulary_;
}

ModelHandle::~ModelHandle() { default_engine_.reset(); }

// ---- PyRequest ----

bool PyRequest::WaitFor(std::chrono::milliseconds timeout) {
  if (result_) return true;
  std::unique_lock lock(queue_->mu);
  if (!queue_->cv.wait_for(lock, timeout, [&] { return queue_->result.has_value(); })) return false;
  result_ = std::move(*queue_->result);
  return true;
}

const EngineResult& PyRequest::result() const {
  if (!result_) throw StatusError(FailedPrecondition("request has not finished"));
  if (!result_->has_value()) throw StatusError(result_->error());
  if ((*result_)->finish == FinishReason::kError) throw StatusError((*result_)->error);
  return **result_;
}

PyRequest::Next PyRequest::NextEvent(std::chrono::milliseconds timeout, std::pair<int32_t, std::string>* event) {
  if (!queue_->stream) throw StatusError(FailedPrecondition("request was not submitted with stream=True"));
  std::unique_lock lock(queue_->mu);
  if (!queue_->cv.wait_for(lock, timeout, [&] { return !queue_->events.empty() || queue_->result.has_value(); }))
    return Next::kTimeout;
  if (queue_->events.empty()) return Next::kFinished;
  *event = std::move(queue_->events.front());
  queue_->events.pop_front();
  return Next::kEvent;
}

Status PyRequest::Cancel() {
  Status status = engine_->Cancel(id_);
  // The id was issued, so NotFound means its waiter already collected it: it has finished.
  if (status.code() == StatusCode::kNotFound) return Status::Ok();
  return status;
}

nb::dict TreeStatsDict(const RadixTreeStats& s) {
  nb::dict d;
  d["unique_tokens"] = s.unique_tokens;
  d["resident_bytes"] = s.resident_bytes;
  d["node_count"] = s.node_count;
  d["lookups"] = s.lookups;
  d["hits"] = s.hits;
  d["misses"] = s.misses;
  d["hit_tokens"] = s.hit_tokens;
  d["prefilled_tokens"] = s.prefilled_tokens;
  d["evicted_tokens"] = s.evicted_tokens;
  return d;
}

nb::dict GateStatsDict(const GateStats& s) {
  nb::dict d;
  d["claims"] = s.claims;
  d["hits"] = s.hits;
  d["misses"] = s.misses;
  d["refusals"] = s.refusals;
  d["corruptions"] = s.corruptions;
  d["claimed_tokens"] = s.claimed_tokens;
  d["hit_tokens"] = s.hit_tokens;
  d["lookups"] = s.lookups;
  d["lookup_tokens"] = s.lookup_tokens;
  d["served_tokens"] = s.served_tokens;
  d["token_hit_rate"] = s.TokenHitRate();
  d["lookup_token_hit_rate"] = s.LookupTokenHitRate();
  nb::dict by_axis;
  for (int i = 0; i < kNumBindingAxes; ++i)
    by_axis[nb::str(std::string(BindingAxisName(static_cast<BindingAxis>(i))).c_str())] = s.misses_by_axis[i];
  d["misses_by_axis"] = by_axis;
  nb::dict by_reason;
  for (int i = 0; i < kNumRefuseReasons; ++i)
    by_reason[nb::str(std::string(RefuseReasonName(static_cast<RefuseReason>(i))).c_str())] = s.refusals_by_reason[i];
  d["refusals_by_reason"] = by_reason;
  return d;
}

EvictionPolicy ParsePolicy(const std::string& name) {
  if (name == "lru") return EvictionPolicy::kLru;
  if (name == "lfu") return EvictionPolicy::kLfu;
  if (name == "deepest_first") return EvictionPolicy::kDeepestFirst;
  throw StatusError(InvalidArgument("policy: expected 'lru', 'lfu' or 'deepest_first', got '" + name + "'"));
}

namespace {

// How often a blocked wait comes back for the GIL to let Python see a pending signal (Ctrl-C).
constexpr std::chrono::milliseconds kSignalCheckInterval{100};

// Runs `wait` (true when done) without the GIL; when it timed out, checks for signals and on one
// cancels the request and raises the signal's exception (KeyboardInterrupt).
template <class F>
bool WaitOrInterrupt(PyRequest& r, F&& wait) {
  bool done;
  {
    nb::gil_scoped_release release;
    done = wait();
  }
  if (done) return true;
  if (PyErr_CheckSignals() != 0) {
    nb::python_error interrupted;  // takes the pending exception
    {
      nb::gil_scoped_release release;
      (void)r.Cancel();  // best effort: the caller is leaving
    }
    throw interrupted;
  }
  return false;
}

nb::str Utf8(const std::string& bytes) {
  // Generated bytes need not be valid UTF-8 (a random-weight model emits any byte).
  return nb::steal<nb::str>(PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace"));
}

nb::dict ResultDict(EngineResult&& r) {
  nb::dict d;
  d["tokens"] = r.tokens;
  d["text"] = Utf8(r.text);
  d["finish_reason"] = std::string(FinishReasonName(r.finish));
  nb::dict usage;
  usage["prompt_tokens"] = r.usage.prompt_tokens;
  usage["cached_tokens"] = r.usage.cached_tokens;
  usage["generated_tokens"] = r.usage.generated_tokens;
  usage["preemptions"] = r.usage.preemptions;
  usage["recomputed_tokens"] = r.usage.recomputed_tokens;
  usage["paged_tokens"] = r.usage.paged_tokens;
  usage["draft_tokens"] = r.usage.draft_tokens;
  usage["accepted_draft_tokens"] = r.usage.accepted_draft_tokens;
  d["usage"] = usage;
  const double ms = 1e-6;
  d["time_to_first_token_ms"] =
      r.timings.first_token_ns ? (r.timings.first_token_ns - r.timings.submitted_ns) * ms : 0.0;
  d["total_ms"] = (r.timings.finished_ns - r.timings.submitted_ns) * ms;
  if (!r.logprobs.empty()) {
    nb::list logprobs;
    for (const TokenLogprobs& lp : r.logprobs) {
      nb::list top;
      for (const TokenLogprob& t : lp.top) top.append(nb::make_tuple(t.token, t.logprob));
      nb::dict entry;
      entry["token"] = lp.chosen.token;
      entry["logprob"] = lp.chosen.logprob;
      entry["top_logprobs"] = top;
      logprobs.append(entry);
    }
    d["logprobs"] = logprobs;
  }
  if (!r.embedding.empty()) d["embedding"] = LogitsArray(std::move(r.embedding));
  if (!r.logits.empty()) {
    const size_t rows = r.logits.size();
    std::vector<float> flat;
    flat.reserve(rows * r.logits[0].size());
    for (const auto& row : r.logits) flat.insert(flat.end(), row.begin(), row.end());
    d["logits"] = LogitsArray(std::move(flat), rows);
  }
  return d;
}

nb::dict EngineStatsDict(const EngineStats& s) {
  nb::dict d;
  d["queued"] = s.queued;
  d["running"] = s.running;
  d["background_queued"] = s.background_queued;
  d["background_running"] = s.background_running;
  d["steps"] = s.steps;
  d["batch_items"] = s.batch_items;
  d["max_batch_items"] = s.max_batch_items;
  d["prefill_chunks"] = s.prefill_chunks;
  d["preemptions"] = s.preemptions;
  d["drafts"] = s.drafts;
  d["draft_tokens"] = s.draft_tokens;
  d["accepted_draft_tokens"] = s.accepted_draft_tokens;
  d["admitted"] = s.admitted;
  d["finished"] = s.finished;
  d["session_kv_bytes"] = s.session_kv_bytes;
  d["tree_kv_bytes"] = s.tree_kv_bytes;
  d["page_ins"] = s.page_ins;
  d["paged_tokens"] = s.paged_tokens;
  d["page_in_refusals"] = s.page_in_refusals;
  nb::dict failures;  // by reason name ("absent", "checksum", "denied", ...); "none" is not a failure
  for (int i = 0; i < kNumPageInFailures; ++i) {
    const PageInFailure f = static_cast<PageInFailure>(i);
    if (f != PageInFailure::kNone) failures[std::string(PageInFailureName(f)).c_str()] = s.page_in_failures[i];
  }
  d["page_in_failures"] = failures;
  return d;
}

// Engine.submit's tools, tool_choice ('auto', 'none', 'required' or a function's name) and
// parallel_tool_calls.
ToolRequest ToolRequestOf(const std::string& tools_json, const std::string& choice, bool parallel) {
  ToolRequest t;
  t.tools_json = tools_json;
  t.choice = choice == "auto" ? ToolChoice::kAuto
             : choice == "none" ? ToolChoice::kNone
             : choice == "required" ? ToolChoice::kRequired
                                    : ToolChoice::kNamed;
  if (t.choice == ToolChoice::kNamed) t.named = choice;
  t.parallel = parallel;
  return t;
}

nb::dict ToolCallDict(const ToolCall& call) {
  nb::dict function;
  function["name"] = call.name;
  function["arguments"] = call.arguments;
  nb::dict out;
  out["id"] = call.id;
  out["type"] = "function";
  out["function"] = function;
  return out;
}

nb::list ToolCallList(const ToolCallReader& reader) {
  nb::list calls;
  for (const ToolCall& call : reader.calls()) calls.append(ToolCallDict(call));
  return calls;
}

// delta.tool_calls entries, as fak serve streams them.
nb::list ToolCallDeltaList(const ToolCallReader& reader) {
  nb::list out;
  for (const ToolCallDelta& d : reader.Deltas()) {
    nb::dict function, delta;
    delta["index"] = d.index;
    if (d.first) {
      delta["id"] = d.id;
      delta["type"] = "function";
      function["name"] = d.name;
    }
    function["arguments"] = d.arguments;
    delta["function"] = function;
    out.append(delta);
  }
  return out;
}

std::unique_ptr<PyRequest> SubmitRequest(PyEngine& engine, const nb::handle& prompt, const nb::handle& messages,
                                         size_t max_tokens, double temperature, size_t top_k, double top_p,
                                         double repeat_penalty, uint64_t seed, const std::vector<Text>& stop,
                                         const std::vector<int32_t>& stop_tokens, const Text& tenant,
                                         bool stream, bool record_logits, const Text& priority_text, double min_p,
                                         double presence_penalty, double frequency_penalty, size_t repeat_last_n,
                                         const nb::handle& logit_bias, bool logprobs, size_t top_logprobs,
                                         const std::optional<Text>& grammar, const std::optional<Text>& tools,
                                         const Text& tool_choice_text, bool parallel_tool_calls,
                                         const nb::handle& embed) {
  const std::string& priority = priority_text;
  EngineRequest req;
  if (priority == "background") {
    req.priority = RequestPriority::kBackground;
  } else if (priority != "interactive") {
    throw StatusError(InvalidArgument("priority: expected 'interactive' or 'background', got '" + priority + "'"));
  }
  if (!prompt.is_none() && !messages.is_none())
    throw StatusError(InvalidArgument("submit: give prompt (str or token ids) or messages, not both"));
  if (!prompt.is_none()) {
    if (nb::isinstance<nb::str>(prompt)) {
      req.prompt = ValueOrThrow(engine.model().RequireTokenizer().Encode(Utf8Of(prompt, "prompt")));
    } else {
      req.prompt = TokensOf(prompt, "submit: prompt");
    }
  } else if (!messages.is_none()) {
    req.messages = ParseMessages(messages);
  } else {
    throw StatusError(InvalidArgument("submit: give prompt (str or token ids) or messages"));
  }
  req.tenant = tenant;
  req.max_tokens = max_tokens;
  req.sampling = ValueOrThrow(SamplingParams::FromDoubles(temperature, top_k, top_p, repeat_penalty, seed));
  req.sampling.min_p = ValueOrThrow(SamplingFloat(min_p, "min_p"));
  req.sampling.presence_penalty = static_cast<float>(presence_penalty);
  req.sampling.frequency_penalty = static_cast<float>(frequency_penalty);
  req.sampling.repetition_window = repeat_last_n;
  if (!logit_bias.is_none()) {
    if (!nb::isinstance<nb::dict>(logit_bias)) throw StatusError(InvalidArgument("logit_bias: expected a dict of token id -> bias"));
    for (auto [key, value] : nb::borrow<nb::dict>(logit_bias)) {
      int64_t id = 0;
      double bias = 0;
      if (!nb::try_cast(key, id) || !nb::try_cast(value, bias) || id < 0 || id > INT32_MAX)
        throw StatusError(InvalidArgument("logit_bias: expected non-negative int token ids mapped to float biases"));
      req.sampling.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias));
    }
  }
  ThrowIfError(req.sampling.Validate());
  req.logprobs = logprobs;
  req.top_logprobs = top_logprobs;
  req.stop_strings = Strings(stop);
  req.stop_tokens = stop_tokens;
  req.record_logits = record_logits;
  std::optional<std::string> gbnf;
  if (grammar) gbnf = grammar->str();
  if (tools) {
    if (req.messages.empty()) throw StatusError(InvalidArgument("tools: only with messages"));
    req.tools = ToolRequestOf(*tools, tool_choice_text, parallel_tool_calls);  // rendered and forced by the engine
  }
  if (!embed.is_none() && !(nb::isinstance<nb::bool_>(embed) && !nb::cast<bool>(embed))) {
    if (!req.messages.empty())
      throw StatusError(InvalidArgument("embed: only with a prompt (str or token ids)"));
    EmbedParams params{engine.model().model->config().pooling, /*normalize=*/true};
    if (nb::isinstance<nb::str>(embed)) {
      params.pooling = ValueOrThrow(ParsePooling(Utf8Of(embed, "embed")));
    } else if (!nb::isinstance<nb::bool_>(embed)) {
      throw StatusError(InvalidArgument("embed: expected True (the model's pooling) or 'mean', 'last' or 'cls'"));
    }
    req.embed = params;  // the result's "embedding"; nothing is generated
  }
  if (gbnf) {
    // Parsed before anything is queued, so a bad grammar is refused naming the keyword.
    Result<Grammar> parsed = Grammar::Parse(*gbnf);
    if (!parsed) {
      std::string message(parsed.error().message());
      if (!message.starts_with("grammar")) message = "grammar: " + message;
      throw StatusError(Status(parsed.error().code(), std::move(message)));
    }
    nb::gil_scoped_release release;  // the first constrained request builds the vocabulary trie
    req.constraint = std::make_shared<GrammarConstraint>(std::move(*parsed), ValueOrThrow(engine.engine().Vocabulary()));
  }
  auto queue = std::make_shared<TokenQueue>();
  queue->stream = stream;
  Result<RequestId> id = [&] {
    nb::gil_scoped_release release;
    return engine.Submit(std::move(req), queue);
  }();
  // A user-made engine is kept alive by its requests; a model's default engine by the model.
  std::shared_ptr<void> keep = engine.weak_from_this().lock();
  if (!keep) keep = engine.model().shared_from_this();
  return std::make_unique<PyRequest>(std::move(keep), &engine, ValueOrThrow(std::move(id)), std::move(queue));
}

}  // namespace

void BindEngine(nb::module_& m) {
  m.def(
      "json_schema_to_gbnf", [](const Text& schema_json) { return ValueOrThrow(JsonSchemaToGbnf(schema_json.str())); },
      nb::arg("schema_json"),
      "GBNF whose sentences are the JSON documents valid against the schema (JSON text; the subset OpenAI "
      "structured outputs use, docs/grammar.md); InvalidArgumentError naming an unsupported keyword.");
  m.def(
      "parse_tool_calls",
      [](const ChatTemplate& chat, const Text& tools, const Text& text, uint64_t seed) {
        ToolCallReader reader = ValueOrThrow(ToolCallReader::Create(chat, ToolRequestOf(tools.str(), "auto", true)));
        reader.Finish(text.str(), seed);
        nb::dict out;
        out["content"] = reader.content().value_or("");
        out["tool_calls"] = ToolCallList(reader);
        return out;
      },
      nb::arg("chat_template"), nb::arg("tools"), nb::arg("text"), nb::arg("seed") = 0,
      "The tool calls in a reply, in the call format of chat_template (docs/server.md 'Tool calls'): "
      "{'content': the text outside the calls, 'tool_calls': [{'id', 'type', 'function': {'name', 'arguments'}}]}; "
      "a call that does not parse or names a function not in tools (JSON text) stays content.");
  nb::class_<ToolCallReader>(m, "ToolCallReader",
                             "One reply read for tool calls as it streams (the reader fak serve uses): feed() the "
                             "streamed text to learn what is content, finish() with the whole text to read the calls.")
      .def(nb::new_([](const ChatTemplate& chat, const Text& tools) {
             return ValueOrThrow(ToolCallReader::Create(chat, ToolRequestOf(tools.str(), "auto", true)));
           }),
           nb::arg("chat_template"), nb::arg("tools"))
      .def(
          "feed", [](ToolCallReader& r, const Text& text) { return r.Feed(text.str()); }, nb::arg("text"),
          "Appends streamed text; returns the part now known to be content (never the start of a call).")
      .def(
          "finish", [](ToolCallReader& r, const Text& text, uint64_t seed) { r.Finish(text.str(), seed); },
          nb::arg("text"), nb::arg("seed") = 0, "Reads the calls of the whole reply (ids drawn from seed).")
      .def_prop_ro(
          "content", [](const ToolCallReader& r) { return r.content(); },
          "The text outside the calls (trimmed beside calls; None when only calls).")
      .def_prop_ro("tool_calls", &ToolCallList, "[{'id', 'type', 'function': {'name', 'arguments'}}]")
      .def("unshown_content", &ToolCallReader::UnshownContent, "After finish(): the content feed() has not returned yet.")
      .def("deltas", &ToolCallDeltaList, "After finish(): the calls as OpenAI's streamed delta.tool_calls entries.");
  m.def(
      "json_object_gbnf", [] { return JsonObjectGbnf(); }, "GBNF for any JSON object (response_format json_object).");
  nb::class_<PyRequest>(m, "Request", "A request queued on an Engine.")
      .def_prop_ro("id", &PyRequest::id)
      .def_prop_ro("streaming", &PyRequest::streaming)
      .def(
          "wait",
          [](PyRequest& r) {
            while (!WaitOrInterrupt(r, [&] { return r.WaitFor(kSignalCheckInterval); })) {
            }
            return ResultDict(EngineResult(r.result()));
          },
          "Blocks (without the GIL; Ctrl-C cancels the request) until it finishes; returns {tokens, text, "
          "finish_reason, usage, ...}.")
      .def(
          "next_event",
          [](PyRequest& r) -> nb::object {
            std::pair<int32_t, std::string> event;
            PyRequest::Next next = PyRequest::Next::kTimeout;
            while (!WaitOrInterrupt(r, [&] {
              next = r.NextEvent(kSignalCheckInterval, &event);
              return next != PyRequest::Next::kTimeout;
            })) {
            }
            if (next == PyRequest::Next::kFinished) return nb::none();
            return nb::make_tuple(event.first, Utf8(event.second));
          },
          "The next streamed (token, text), or None once the request has finished (stream=True only).")
      .def("cancel", [](PyRequest& r) {
        nb::gil_scoped_release release;
        ThrowIfError(r.Cancel());
      });

  nb::class_<PyEngine> engine(m, "Engine",
                              "The serving engine: requests from any thread are batched into one forward pass per "
                              "step on its own thread, reusing prefixes through the radix tree.");
  engine.def(nb::new_([](ModelRef model, size_t max_running, size_t max_queued, size_t prefill_chunk_tokens,
                         size_t step_token_budget, size_t kv_budget_bytes, const Text& policy,
                         const std::optional<Text>& kv_tier_dir, const Text& speculate, ModelRef draft_model) {
               if (!model) throw StatusError(InvalidArgument("Engine: model is None"));
               EngineOptions o;
               o.max_running = max_running;
               o.max_queued = max_queued;
               o.prefill_chunk_tokens = prefill_chunk_tokens;
               o.step_token_budget = step_token_budget;
               o.kv_budget_bytes = kv_budget_bytes;
               o.tree_options.policy = ParsePolicy(policy);
               o.speculation = ValueOrThrow(ParseSpeculation(speculate));
               if (draft_model) {
                 if (o.speculation.source != DraftSource::kNone)
                   throw StatusError(InvalidArgument("Engine: give speculate or draft_model, not both"));
                 o.speculation.source = DraftSource::kModel;
                 // The engine's options hold the draft model as long as the handle lives.
                 o.speculation.draft_model = std::shared_ptr<const Model>(draft_model, draft_model->model.get());
               }
               std::unique_ptr<EngineKVTier> tier;
               if (kv_tier_dir) {
                 tier = std::make_unique<EngineKVTier>();
                 tier->store = ValueOrThrow(OpenDirectoryKVTier(*kv_tier_dir, Env::Default()));
                 tier->spiller = std::make_unique<TierSpiller>(*tier->store);
                 tier->pager = std::make_unique<TierPager>(*tier->store, tier->access, /*denylist=*/nullptr);
               }
               ModelHandle* raw = model.get();
               return std::make_shared<PyEngine>(raw, std::move(model), std::move(o), std::move(tier));
             }),
             nb::arg("model"), nb::kw_only(), nb::arg("max_running") = 16, nb::arg("max_queued") = 256,
             nb::arg("prefill_chunk_tokens") = 256, nb::arg("step_token_budget") = 512, nb::arg("kv_budget_bytes") = 0,
             nb::arg("policy") = "lru", nb::arg("kv_tier_dir") = nb::none(), nb::arg("speculate") = "off",
             nb::arg("draft_model") = nb::none(),
             "speculate: exact speculative decoding for its requests — 'off', 'ngram' (prompt lookup) or "
             "'ngram:K' (K draft tokens); draft_model: a smaller Model with the same vocabulary drafts instead. "
             "Tokens and logits are those of plain decoding (docs/engine.md, Speculative decoding).");
  engine
      .def("submit", &SubmitRequest, nb::arg("prompt") = nb::none(), nb::kw_only(), nb::arg("messages") = nb::none(),
           nb::arg("max_tokens") = 64, nb::arg("temperature") = 0.0, nb::arg("top_k") = 0, nb::arg("top_p") = 1.0,
           nb::arg("repeat_penalty") = 1.0, nb::arg("seed") = 0, nb::arg("stop") = std::vector<std::string>{},
           nb::arg("stop_tokens") = std::vector<int32_t>{}, nb::arg("tenant") = "default", nb::arg("stream") = false,
           nb::arg("record_logits") = false, nb::arg("priority") = "interactive", nb::arg("min_p") = 0.0,
           nb::arg("presence_penalty") = 0.0, nb::arg("frequency_penalty") = 0.0, nb::arg("repeat_last_n") = 0,
           nb::arg("logit_bias") = nb::none(), nb::arg("logprobs") = false, nb::arg("top_logprobs") = 0,
           nb::arg("grammar") = nb::none(), nb::arg("tools") = nb::none(), nb::arg("tool_choice") = "auto",
           nb::arg("parallel_tool_calls") = true, nb::arg("embed") = nb::none(),
           "Queues a request: prompt (str or token ids) or messages ([{'role', 'content'}], rendered with the "
           "model's chat template; then empty stop_tokens mean EOS and end-of-turn). max_tokens=0: prefill only "
           "(warms the radix tree). priority='background' runs in what interactive requests leave. Sampling: "
           "temperature, top_k, top_p, min_p, repeat_penalty over the last repeat_last_n tokens (0 = all), OpenAI's "
           "presence/frequency penalties, logit_bias {id: bias} (-100 bans), seed; logprobs/top_logprobs put each "
           "token's log-probabilities in the result; grammar (GBNF text, docs/grammar.md) constrains the reply to its "
           "sentences; tools (the OpenAI tools list as JSON text), tool_choice ('auto', 'none', 'required' or a "
           "function's name) and parallel_tool_calls render and force tool calls as fak serve does (read them back "
           "with parse_tool_calls). embed=True (the model's pooling) or 'mean', 'last' or 'cls': the prompt's embedding "
           "instead of a reply (the result's 'embedding', unit length, as Model.embed gives it; batched with "
           "the engine's other requests). Returns a Request at once; "
           "its wait() and next_event() block without the GIL, so many Python threads can submit at once.")
      .def(
          "create_chat_completion",
          [](nb::handle self, nb::args args, nb::kwargs kwargs) {
            return nb::module_::import_("fak._chat").attr("create_chat_completion")(self, *args, **kwargs);
          },
          nb::sig(kChatCompletionSignature),
          "A chat completion on this engine, shaped like llama-cpp-python's (see fak.create_chat_completion).")
      .def_prop_ro(
          "model", [](PyEngine& e) { return e.model().shared_from_this(); }, "The Model this engine runs.")
      .def("stats", [](PyEngine& e) { return EngineStatsDict(e.engine().Stats()); })
      .def(
          "tree_stats", [](PyEngine& e) { return TreeStatsDict(e.engine().tree().Stats()); },
          "The radix tree: unique tokens, resident bytes, lookups, hits, tokens served.")
      .def(
          "gate_stats", [](PyEngine& e) { return GateStatsDict(e.engine().tree().GateStatistics()); },
          "The manifest gate's verdicts: hits, misses by binding axis, refusals by reason.")
      .def(
          "flush",
          [](PyEngine& e) {
            nb::gil_scoped_release release;
            e.FlushTier();
          },
          "Waits until every node the tree has written through to kv_tier_dir so far is on disk (no-op "
          "without a tier).")
      .def(
          "shutdown",
          [](PyEngine& e, bool drain) {
            nb::gil_scoped_release release;
            e.Shutdown(drain);
          },
          nb::arg("drain") = false, "Stops the engine: cancels what is queued or running, or first lets it finish.");
}

}  // namespace fak::python
