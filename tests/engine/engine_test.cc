// Engine: results, stop conditions, cancellation at every stage, deadlines, the KV budget
// (admission waits, preemption resumes exactly), tenant fairness, queue limits, shutdown, and many
// threads submitting and cancelling at once (the EngineConcurrent* tests also run under TSan).
#include "fak/engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fak/grammar/grammar_constraint.h"
#include "fak/grammar/tool_calls.h"
#include "src/engine/fair_share.h"
#include "tests/engine/alone.h"
#include "tests/model/test_models.h"
#include "tests/support/manual_clock_env.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::TokenSequence;

constexpr const char* kTenants[] = {"t0", "t1", "t2"};

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(model_, Model::Synthetic(testing::TinyConfig(), 11));
    tokenizer_ = MakeByteTokenizer();
  }
  // A stepped engine (no thread) unless the test asks for one.
  std::unique_ptr<Engine> Make(EngineOptions options = Stepped()) {
    auto engine = Engine::Create(*model_, *tokenizer_, std::move(options));
    EXPECT_TRUE(engine.has_value()) << engine.error().ToString();
    return engine.has_value() ? std::move(*engine) : nullptr;
  }
  static EngineOptions Stepped() {
    EngineOptions o;
    o.start_thread = false;
    return o;
  }
  EngineRequest Request(size_t prompt_len, uint32_t seed, size_t max_tokens, std::string tenant = "default") const {
    EngineRequest r;
    r.tenant = std::move(tenant);
    r.prompt = TokenSequence(prompt_len, seed, model_->config().vocab_size);
    r.max_tokens = max_tokens;
    return r;
  }
  testing::AloneRun Alone(const EngineRequest& r) const {
    return testing::RunAlone(*model_, r.prompt, r.sampling, r.max_tokens);
  }
  size_t BytesPerToken() const {
    const ModelConfig& c = model_->config();
    return 3 * c.n_layers * c.n_kv_heads * c.head_dim * KVDtypeBytes(model_->kv_dtype()) + sizeof(int32_t);
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(EngineTest, ResultCarriesTokensTextUsageAndTimings) {
  auto engine = Make();
  EngineRequest r = Request(20, 1, 6);
  std::string streamed;
  r.on_token = [&](const TokenEvent& e) {
    streamed += e.text;
    return true;
  };
  ASSERT_OK_AND_ASSIGN(RequestId id, engine->Submit(r));
  ASSERT_OK_AND_ASSIGN(EngineResult got, engine->Wait(id));
  EXPECT_EQ(got.finish, FinishReason::kLength);
  EXPECT_EQ(got.tokens, Alone(r).tokens);
  ASSERT_OK_AND_ASSIGN(std::string text, tokenizer_->Decode(got.tokens));
  EXPECT_EQ(got.text, text);
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(got.usage.prompt_tokens, 20u);
  EXPECT_EQ(got.usage.generated_tokens, 6u);
  EXPECT_EQ(got.usage.cached_tokens, 0u);
  EXPECT_EQ(got.timings.token_ns.size(), 6u);
  EXPECT_TRUE(got.logits.empty());  // not asked for
  // Collected once.
  EXPECT_EQ(engine->Wait(id).error().code(), StatusCode::kNotFound);

  // The same prompt again reuses all of it but the last token from the tree.
  ASSERT_OK_AND_ASSIGN(RequestId again, engine->Submit(r));
  ASSERT_OK_AND_ASSIGN(EngineResult second, engine->Wait(again));
  EXPECT_EQ(second.usage.cached_tokens, 19u);
  EXPECT_EQ(second.tokens, got.tokens);
}

TEST_F(EngineTest, MessagesAreRenderedWithTheEnginesTemplate) {
  ModelConfig bytes = testing::TinyConfig();
  bytes.vocab_size = 258;  // the byte tokenizer's ids, BOS and EOS
  ASSERT_OK_AND_ASSIGN(model_, Model::Synthetic(bytes, 11));
  ASSERT_OK_AND_ASSIGN(ChatTemplate chat, ChatTemplate::ForFamily("fak", *tokenizer_));
  EngineOptions o = Stepped();
  o.chat_template = std::make_shared<const ChatTemplate>(chat);
  auto engine = Make(o);
  EngineRequest by_messages;
  by_messages.messages = {{ChatRole::kSystem, "be brief"}, {ChatRole::kUser, "hello"}};
  by_messages.max_tokens = 5;
  ASSERT_OK_AND_ASSIGN(RenderedChat rendered, chat.Render(by_messages.messages));
  EngineRequest by_tokens = by_messages;
  by_tokens.messages.clear();
  ASSERT_OK_AND_ASSIGN(by_tokens.prompt, EncodeRendered(*tokenizer_, rendered));
  ASSERT_OK_AND_ASSIGN(RequestId a, engine->Submit(by_messages));
  ASSERT_OK_AND_ASSIGN(EngineResult from_messages, engine->Wait(a));
  EXPECT_EQ(from_messages.usage.prompt_tokens, by_tokens.prompt.size());
  EXPECT_EQ(from_messages.tokens, Alone(by_tokens).tokens);
  // Both a prompt and messages, or messages without a template, are refused.
  EngineRequest both = by_tokens;
  both.messages = by_messages.messages;
  EXPECT_EQ(engine->Submit(both).error().code(), StatusCode::kInvalidArgument);
  auto plain = Make();
  EXPECT_EQ(plain->Submit(by_messages).error().code(), StatusCode::kFailedPrecondition);
  // The template's refusals reach the caller.
  ASSERT_OK_AND_ASSIGN(ChatTemplate gemma, ChatTemplate::ForFamily("gemma", *tokenizer_));
  o.chat_template = std::make_shared<const ChatTemplate>(gemma);
  auto strict = Make(o);
  EngineRequest unalternating;
  unalternating.messages = {{ChatRole::kUser, "one"}, {ChatRole::kUser, "two"}};
  EXPECT_EQ(strict->Submit(unalternating).error().code(), StatusCode::kInvalidArgument);
}

// Prepare gives a host the prompt Submit runs, without the host tokenizing chat: message text is
// plain text (a message spelling the template's markup is not markup), each message's run carries
// its text's digest, and the template's end-of-turn tokens are the stops. A refused request is
// left as it was.
TEST_F(EngineTest, PrepareGivesThePromptSubmitRuns) {
  ModelConfig bytes = testing::TinyConfig();
  bytes.vocab_size = 258;
  ASSERT_OK_AND_ASSIGN(model_, Model::Synthetic(bytes, 11));
  ASSERT_OK_AND_ASSIGN(ChatTemplate chat, ChatTemplate::ForFamily("fak", *tokenizer_));
  EngineOptions o = Stepped();
  o.chat_template = std::make_shared<const ChatTemplate>(chat);
  auto engine = Make(o);
  ASSERT_NE(engine->chat_template(), nullptr);
  EngineRequest r;
  r.messages = {{ChatRole::kSystem, "be brief"}, {ChatRole::kUser, "hello"}};
  r.max_tokens = 4;
  EngineRequest prepared = r;
  ASSERT_OK(engine->Prepare(prepared));
  EXPECT_TRUE(prepared.messages.empty());
  ASSERT_OK_AND_ASSIGN(RenderedChat rendered, chat.Render(r.messages));
  ASSERT_OK_AND_ASSIGN(std::vector<int32_t> expected, EncodeRendered(*tokenizer_, rendered));
  EXPECT_EQ(prepared.prompt, expected);
  ASSERT_EQ(prepared.sources.size(), 2u);
  EXPECT_EQ(prepared.sources[0].source, Digest::Of("be brief"));
  EXPECT_EQ(prepared.sources[1].source, Digest::Of("hello"));
  EXPECT_EQ(prepared.stop_tokens, EndOfGenerationTokens(*tokenizer_, &chat));
  // Submitting the prepared form runs exactly what the messages run.
  ASSERT_OK_AND_ASSIGN(RequestId a, engine->Submit(r));
  ASSERT_OK_AND_ASSIGN(EngineResult by_messages, engine->Wait(a));
  auto fresh = Make(o);
  ASSERT_OK_AND_ASSIGN(RequestId b, fresh->Submit(prepared));
  ASSERT_OK_AND_ASSIGN(EngineResult by_tokens, fresh->Wait(b));
  EXPECT_EQ(by_messages.tokens, by_tokens.tokens);
  EXPECT_EQ(by_messages.usage.prompt_tokens, prepared.prompt.size());
  // A token request is left as it is; a refused one is unchanged.
  EngineRequest tokens = Request(8, 3, 2);
  const std::vector<int32_t> before = tokens.prompt;
  ASSERT_OK(engine->Prepare(tokens));
  EXPECT_EQ(tokens.prompt, before);
  EXPECT_TRUE(tokens.sources.empty());
  EngineRequest both = r;
  both.prompt = before;
  EXPECT_EQ(engine->Prepare(both).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(both.messages.size(), 2u);
  EXPECT_EQ(both.prompt, before);
  EXPECT_EQ(Make()->Prepare(r).code(), StatusCode::kFailedPrecondition);
}

// Tools are the engine's to prepare: Prepare renders them through the template (a template
// without tools gets them described in its system message), a named tool or required installs the
// grammar that forces calls, and the reply reads back with ToolCallReader. Bad tools and a forced
// call beside another constraint are refused, leaving the request as it was.
TEST_F(EngineTest, PrepareRendersToolsAndForcesCalls) {
  ModelConfig bytes = testing::TinyConfig();
  bytes.vocab_size = 258;
  ASSERT_OK_AND_ASSIGN(model_, Model::Synthetic(bytes, 11));
  ASSERT_OK_AND_ASSIGN(ChatTemplate chat, ChatTemplate::ForFamily("fak", *tokenizer_));
  EngineOptions o = Stepped();
  o.chat_template = std::make_shared<const ChatTemplate>(chat);
  auto engine = Make(o);
  EngineRequest r;
  r.messages = {{ChatRole::kUser, "weather in Paris?"}};
  r.max_tokens = 270;  // within the context with the tools' prompt; the call closes well before
  r.tools.tools_json =
      R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":)"
      R"({"city":{"type":"string","maxLength":8}},"required":["city"],"additionalProperties":false}}}])";
  // auto: rendered with the template's tools.
  EngineRequest offered = r;
  ASSERT_OK(engine->Prepare(offered));
  ChatRenderOptions render;
  render.tools_json = r.tools.tools_json;
  ASSERT_OK_AND_ASSIGN(RenderedChat with_tools, chat.Render(r.messages, render));
  ASSERT_OK_AND_ASSIGN(std::vector<int32_t> expected, EncodeRendered(*tokenizer_, with_tools));
  EXPECT_EQ(offered.prompt, expected);
  EXPECT_EQ(offered.tools.tools_json, r.tools.tools_json);  // kept, for the reader
  EXPECT_NE(offered.constraint, nullptr);  // auto: a call is held to the schema from its marker on
  // none: the tools are not offered (the control: the prompt differs).
  EngineRequest withheld = r;
  withheld.tools.choice = ToolChoice::kNone;
  ASSERT_OK(engine->Prepare(withheld));
  EXPECT_NE(withheld.prompt, offered.prompt);
  EXPECT_EQ(withheld.constraint, nullptr);
  // A named tool: the reply is a call of it, whose arguments parse.
  EngineRequest named = r;
  named.tools.choice = ToolChoice::kNamed;
  named.tools.named = "get_weather";
  ASSERT_OK_AND_ASSIGN(RequestId id, engine->Submit(named));
  ASSERT_OK_AND_ASSIGN(EngineResult result, engine->Wait(id));
  EXPECT_EQ(result.finish, FinishReason::kStopToken) << result.text;
  ASSERT_OK_AND_ASSIGN(ToolCallReader reader, ToolCallReader::Create(chat, named.tools));
  reader.Finish(result.text, 7);
  ASSERT_EQ(reader.calls().size(), 1u) << result.text;
  EXPECT_EQ(reader.calls()[0].name, "get_weather");
  EXPECT_TRUE(reader.calls()[0].arguments.starts_with("{\"city\":\"")) << reader.calls()[0].arguments;
  EXPECT_EQ(reader.content(), std::nullopt);
  // Refusals leave the request as it was.
  EngineRequest unknown = r;
  unknown.tools.choice = ToolChoice::kNamed;
  unknown.tools.named = "get_time";
  EXPECT_EQ(engine->Prepare(unknown).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.messages.size(), 1u);
  EXPECT_TRUE(unknown.prompt.empty());
  EngineRequest twice = named;
  ASSERT_OK_AND_ASSIGN(Grammar yes, Grammar::Parse("root ::= \"yes\"\n"));
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<const TokenVocabulary> vocabulary, engine->Vocabulary());
  twice.constraint = std::make_shared<GrammarConstraint>(yes, vocabulary);
  EXPECT_EQ(engine->Prepare(twice).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(twice.messages.size(), 1u);
  EngineRequest malformed = r;
  malformed.tools.tools_json = R"({"not": "a list"})";
  EXPECT_EQ(engine->Prepare(malformed).code(), StatusCode::kInvalidArgument);
  // A template that does not render tools (Gemma's) gets them described in a system turn.
  ASSERT_OK_AND_ASSIGN(ChatTemplate gemma, ChatTemplate::ForFamily("gemma", *tokenizer_));
  o.chat_template = std::make_shared<const ChatTemplate>(gemma);
  auto described = Make(o);
  EngineRequest plain = r;
  plain.tools = {};
  EngineRequest json = r;
  ASSERT_OK(described->Prepare(plain));
  ASSERT_OK(described->Prepare(json));
  EXPECT_GT(json.prompt.size(), plain.prompt.size() + 20);
}

TEST_F(EngineTest, SubmitRefusesBadRequestsAndChangesNothing) {
  EngineOptions o = Stepped();
  o.kv_budget_bytes = 100 * BytesPerToken();
  auto engine = Make(o);
  struct Bad {
    EngineRequest request;
    StatusCode code;
  };
  std::vector<Bad> cases;
  cases.push_back({Request(5, 1, 4, "no spaces allowed"), StatusCode::kInvalidArgument});
  cases.push_back({Request(0, 1, 4), StatusCode::kInvalidArgument});
  EngineRequest out_of_vocab = Request(5, 1, 4);
  out_of_vocab.prompt[2] = 97;
  cases.push_back({out_of_vocab, StatusCode::kInvalidArgument});
  EngineRequest bad_sampling = Request(5, 1, 4);
  bad_sampling.sampling.top_p = 0.0f;
  cases.push_back({bad_sampling, StatusCode::kInvalidArgument});
  cases.push_back({Request(80, 1, 30), StatusCode::kResourceExhausted});  // 110 tokens > the KV budget of 100
  o.kv_budget_bytes = 0;
  auto unbounded = Make(o);
  for (const Bad& b : cases) {
    auto r = engine->Submit(b.request);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), b.code) << r.error().ToString();
  }
  for (size_t max_tokens : {size_t{20}, SIZE_MAX}) {
    auto too_long = unbounded->Submit(Request(500, 1, max_tokens));  // TinyConfig's context is 512
    ASSERT_FALSE(too_long.has_value());
    EXPECT_EQ(too_long.error().code(), StatusCode::kResourceExhausted);
  }
  // Prefill only (max_tokens 0): the prompt alone must fit; 512 does, 513 does not.
  EXPECT_TRUE(unbounded->Submit(Request(512, 1, 0)).has_value());
  auto too_long = unbounded->Submit(Request(513, 1, 0));
  ASSERT_FALSE(too_long.has_value());
  EXPECT_EQ(too_long.error().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(engine->Stats().queued, 0u);
  EXPECT_FALSE(engine->Step());
}

TEST_F(EngineTest, StopTokenEndsGenerationWithTheTokenAndNoText) {
  auto engine = Make();
  EngineRequest r = Request(12, 2, 10);
  const std::vector<int32_t> free_run = Alone(r).tokens;
  r.stop_tokens = {free_run[3], 200};
  const size_t first_stop = std::find(free_run.begin(), free_run.end(), free_run[3]) - free_run.begin();
  ASSERT_OK_AND_ASSIGN(RequestId id, engine->Submit(r));
  ASSERT_OK_AND_ASSIGN(EngineResult got, engine->Wait(id));
  EXPECT_EQ(got.finish, FinishReason::kStopToken);
  EXPECT_EQ(got.tokens, std::vector<int32_t>(free_run.begin(), free_run.begin() + first_stop + 1));
  ASSERT_OK_AND_ASSIGN(std::string before, tokenizer_->Decode(std::span(free_run).first(first_stop)));
  EXPECT_EQ(got.text, before);
}

TEST_F(EngineTest, StopStringsAreNeverStreamed) {
  auto engine = Make();
  EngineRequest r = Request(12, 3, 16);
  ASSERT_OK_AND_ASSIGN(std::string free_text, tokenizer_->Decode(Alone(r).tokens));
  // A stop string from the middle of what the model says, spanning two tokens.
  const std::string stop = free_text.substr(6, 2);
  const size_t at = free_text.find(stop);
  r.stop_strings = {"never said by this model \x7f", stop};
  std::string streamed;
  r.on_token = [&](const TokenEvent& e) {
    streamed += e.text;
    EXPECT_EQ(streamed.find(stop), std::string::npos);
    return true;
  };
  ASSERT_OK_AND_ASSIGN(RequestId id, engine->Submit(r));
  ASSERT_OK_AND_ASSIGN(EngineResult got, engine->Wait(id));
  EXPECT_EQ(got.finish, FinishReason::kStopString);
  EXPECT_EQ(got.text, free_text.substr(0, at));
  EXPECT_EQ(streamed, got.text);
  EXPECT_EQ(got.tokens.size(), at + stop.size());  // byte tokens: the stop string's last byte ends it
}

TEST_F(EngineTest, CancelBeforeAdmission) {
  auto engine = Make();
  EngineRequest r = Request(10, 4, 5);
  bool called = false;
  r.on_token = [&](const TokenEvent&) { return called = true; };
  ASSERT_OK_AND_ASSIGN(RequestId id, engine->Submit(r));
  ASSERT_OK(engine->Cancel(id));
  EXPECT_EQ(engine->Stats().queued, 0u);
  ASSERT_OK_AND_ASSIGN(EngineResult got, engine->Wait(id));
  EXPECT_EQ(got.finish, FinishReason::kCancelled);
  EXPECT_TRUE(got.tokens.empty());
  EXPECT_FALSE(called);
  EXPECT_EQ(engine->Cancel(id).code(), StatusCode::kNotFound);  // collected
  EXPECT_EQ(engine->Cancel(12345).code(), StatusCode::kNotFound);
}

TEST_F(EngineTest, CancelMidPrefill) {
  EngineOptions o = Stepped();
  o.prefill_chunk_tokens = 8;
  auto engine = Make(o);
  EngineRequest r = Request(60, 5, 5);
  bool called = false;
  r.on_token = [&](const TokenEvent&) { return called = true; };
  ASSERT_OK_AND_ASSIGN(RequestId id, engine->Submit(r));
  ASSERT_TRUE(engine->Step());
  ASSERT_TRUE(engine->Step());
  EXPECT_EQ(engine->Stats().prefill_chunks, 2u);  // 16 of 60 prompt tokens read
  ASSERT_OK(engine->Cancel(id));
  EXPECT_FALSE(engine->Step());
  ASSERT_OK_AND_ASSIGN(EngineResult got, engine->Wait(id));
  EXPECT_EQ(got.finish, FinishReason::kCancelled);
  EXPECT_TRUE(got.tokens.empty());
  EXPECT_FALSE(called);
  EXPECT_EQ(engine->Stats().steps, 2u);
}

TEST_F(EngineTest, CancelMidDecodeFromTheCallbackOrByReturningFalse) {
  auto engine = Make();
  EngineRequest by_cancel = Request(10, 6, 20), by_false = Request(10, 7, 20);
  Engine* e = engine.get();
  size_t cancel_seen = 0;
  by_cancel.on_token = [&](const TokenEvent& ev) {
    if (++cancel_seen == 2) EXPECT_OK(e->Cancel(ev.id));
    return true;
  };
  size_t seen = 0;
  by_false.on_token = [&](const TokenEvent&) { return ++seen < 3; };
  ASSERT_OK_AND_ASSIGN(RequestId cancel_id, engine->Submit(by_cancel));
  ASSERT_OK_AND_ASSIGN(RequestId false_id, engine->Submit(by_false));
  ASSERT_OK_AND_ASSIGN(EngineResult cancelled, engine->Wait(cancel_id));
  ASSERT_OK_AND_ASSIGN(EngineResult stopped, engine->Wait(false_id));
  EXPECT_EQ(cancelled.finish, FinishReason::kCancelled);
  EXPECT_EQ(cancelled.tokens.size(), 2u);  // it ends before the next step
  EXPECT_EQ(cancel_seen, 2u);
  EXPECT_EQ(stopped.finish, FinishReason::kCancelled);
  EXPECT_EQ(stopped.tokens.size(), 3u);
  EXPECT_EQ(seen, 3u);
}

TEST_F(EngineTest, CallbackThatThrowsEndsItsRequestInError) {
  auto engine = Make();
  EngineRequest r = Request(10, 8, 5);
  r.on_token = [](const TokenEvent&) -> bool { throw std::runtime_error("host bug"); };
  ASSERT_OK_AND_ASSIGN(RequestId id, engine->Submit(r));
  ASSERT_OK_AND_ASSIGN(EngineResult got, engine->Wait(id));
  EXPECT_EQ(got.finish, FinishReason::kError);
  EXPECT_FALSE(got.error.ok());
  EXPECT_EQ(got.tokens.size(), 1u);
}

TEST_F(EngineTest, DeadlinesEndQueuedAndRunningRequests) {
  testing::ManualClockEnv clock;
  clock.Set(1'000);
  EngineOptions o = Stepped();
  o.env = &clock;
  o.max_running = 1;
  auto engine = Make(o);
  EngineRequest running = Request(10, 9, 50), waiting = Request(10, 10, 50);
  running.deadline_ns = 5'000;
  waiting.deadline_ns = 3'000;
  ASSERT_OK_AND_ASSIGN(RequestId run_id, engine->Submit(running));
  ASSERT_OK_AND_ASSIGN(RequestId wait_id, engine->Submit(waiting));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(engine->Step());
  clock.Set(3'000);  // past the waiting one's deadline, before the running one's
  ASSERT_TRUE(engine->Step());
  clock.Set(5'000);
  engine->Step();
  ASSERT_OK_AND_ASSIGN(EngineResult ran, engine->Wait(run_id));
  ASSERT_OK_AND_ASSIGN(EngineResult waited, engine->Wait(wait_id));
  EXPECT_EQ(ran.finish, FinishReason::kDeadline);
  EXPECT_EQ(ran.tokens.size(), 5u);  // one per step before the deadline
  const std::vector<int32_t> alone = Alone(running).tokens;
  EXPECT_EQ(ran.tokens, std::vector<int32_t>(alone.begin(), alone.begin() + 5));
  EXPECT_EQ(waited.finish, FinishReason::kDeadline);
  EXPECT_TRUE(waited.tokens.empty());
  EXPECT_EQ(ran.timings.submitted_ns, 1'000);
  EXPECT_EQ(ran.timings.finished_ns, 5'000);
}

TEST_F(EngineTest, QueueFullIsUnavailableUntilAdmissionMakesRoom) {
  EngineOptions o = Stepped();
  o.max_queued = 2;
  o.max_running = 2;
  auto engine = Make(o);
  ASSERT_OK(engine->Submit(Request(5, 1, 3)));
  ASSERT_OK(engine->Submit(Request(5, 2, 3)));
  auto full = engine->Submit(Request(5, 3, 3));
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(full.error().code(), StatusCode::kUnavailable);
  EXPECT_EQ(engine->Stats().queued, 2u);
  engine->Step();  // admits both
  EXPECT_EQ(engine->Stats().queued, 0u);
  ASSERT_OK_AND_ASSIGN(RequestId id, engine->Submit(Request(5, 3, 3)));
  ASSERT_OK_AND_ASSIGN(EngineResult got, engine->Wait(id));
  EXPECT_EQ(got.finish, FinishReason::kLength);
}

TEST_F(EngineTest, OneTenantCannotFillTheQueueForAll) {
  EngineOptions o = Stepped();
  o.max_queued = 8;
  o.max_queued_per_tenant = 2;
  auto engine = Make(o);
  ASSERT_OK(engine->Submit(Request(5, 1, 3, "greedy")));
  ASSERT_OK(engine->Submit(Request(5, 2, 3, "greedy")));
  auto refused = engine->Submit(Request(5, 3, 3, "greedy"));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.error().message().find("max_queued_per_tenant"), std::string_view::npos) << refused.error().ToString();
  // Control: another tenant still gets in, and the greedy one does once its line moves.
  ASSERT_OK_AND_ASSIGN(RequestId other, engine->Submit(Request(5, 4, 3, "other")));
  engine->Step();
  ASSERT_OK(engine->Submit(Request(5, 3, 3, "greedy")));
  ASSERT_OK_AND_ASSIGN(EngineResult got, engine->Wait(other));
  EXPECT_EQ(got.finish, FinishReason::kLength);
}

TEST_F(EngineTest, AdmissionWaitsForTheBudget) {
  EngineOptions o = Stepped();
  o.kv_budget_bytes = 50 * BytesPerToken();  // one 40-token context at a time
  auto engine = Make(o);
  EngineRequest a = Request(30, 12, 10, "alpha"), b = Request(30, 13, 10, "beta");
  ASSERT_OK_AND_ASSIGN(RequestId ia, engine->Submit(a));
  ASSERT_OK_AND_ASSIGN(RequestId ib, engine->Submit(b));
  engine->Step();
  EXPECT_EQ(engine->Stats().running, 1u);
  EXPECT_EQ(engine->Stats().queued, 1u);
  ASSERT_OK_AND_ASSIGN(EngineResult ra, engine->Wait(ia));
  ASSERT_OK_AND_ASSIGN(EngineResult rb, engine->Wait(ib));
  EXPECT_EQ(ra.tokens, Alone(a).tokens);
  EXPECT_EQ(rb.tokens, Alone(b).tokens);
  EXPECT_EQ(ra.usage.preemptions + rb.usage.preemptions, 0u);
  const EngineStats s = engine->Stats();
  EXPECT_LE(s.tree_kv_bytes + s.session_kv_bytes, o.kv_budget_bytes);
}

TEST_F(EngineTest, PreemptedRequestResumesExactly) {
  EngineOptions o = Stepped();
  o.kv_budget_bytes = 70 * BytesPerToken();  // both 20-token prompts fit; both 60-token contexts do not
  o.prefill_chunk_tokens = 64;
  auto engine = Make(o);
  EngineRequest a = Request(20, 14, 40, "alpha"), b = Request(20, 15, 40, "beta");
  a.sampling = {.temperature = 0.8f, .top_k = 20, .top_p = 0.9f, .repetition_penalty = 1.2f, .seed = 3};
  b.sampling = {.temperature = 3.0f, .top_k = 0, .top_p = 1.0f, .repetition_penalty = 1.0f, .seed = 4};  // near uniform: every draw counts
  a.record_logits = b.record_logits = true;
  ASSERT_OK_AND_ASSIGN(RequestId ia, engine->Submit(a));
  ASSERT_OK_AND_ASSIGN(RequestId ib, engine->Submit(b));
  engine->Step();
  EXPECT_EQ(engine->Stats().running, 2u);
  ASSERT_OK_AND_ASSIGN(EngineResult ra, engine->Wait(ia));
  ASSERT_OK_AND_ASSIGN(EngineResult rb, engine->Wait(ib));
  EXPECT_EQ(rb.usage.preemptions, 1u);  // the later admitted gives way
  EXPECT_GT(rb.usage.recomputed_tokens, 0u);
  EXPECT_EQ(ra.usage.preemptions, 0u);
  for (const auto& [got, want] : {std::pair{&ra, Alone(a)}, std::pair{&rb, Alone(b)}}) {
    EXPECT_EQ(got->tokens, want.tokens);
    ASSERT_EQ(got->logits.size(), want.logits.size());
    for (size_t t = 0; t < want.logits.size(); ++t) EXPECT_EQ(testing::MaxAbsDiff(got->logits[t], want.logits[t]), 0.0f);
  }
  EXPECT_GE(engine->Stats().preemptions, 1u);
  // Control: b's tokens depend on its Sampler's stream, so a resume that restarted it would show.
  EngineRequest reseeded = b;
  reseeded.sampling.seed = 5;
  EXPECT_NE(Alone(reseeded).tokens, Alone(b).tokens);
}

TEST_F(EngineTest, RequestsSharingAPromptPrefixComputeItOnce) {
  const std::vector<int32_t> system = TokenSequence(50, 400, model_->config().vocab_size);
  std::vector<EngineRequest> requests;
  for (uint32_t i = 0; i < 4; ++i) {
    EngineRequest r = Request(6, 410 + i, 3);
    r.prompt.insert(r.prompt.begin(), system.begin(), system.end());
    requests.push_back(std::move(r));
  }
  for (size_t wait_tokens : {size_t{32}, size_t{0}}) {
    EngineOptions o = Stepped();
    o.shared_prefix_wait_tokens = wait_tokens;
    auto engine = Make(o);
    std::vector<RequestId> ids;
    for (const EngineRequest& r : requests) ids.push_back(*engine->Submit(r));
    if (wait_tokens != 0) {
      // The first's prompt (56 tokens) is read in the first step and given to the tree as two
      // nodes, the shared 50 tokens and its own 6: the others' lookups then split (copy and hash
      // again) no edge. Inserted whole it would be one node, split at the next step.
      ASSERT_TRUE(engine->Step());
      EXPECT_EQ(engine->tree().Stats().node_count, 2u);
      EXPECT_EQ(engine->tree().Stats().unique_tokens, system.size() + 6);
    }
    size_t cached = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_OK_AND_ASSIGN(EngineResult got, engine->Wait(ids[i]));
      EXPECT_EQ(got.tokens, Alone(requests[i]).tokens);
      cached += got.usage.cached_tokens;
    }
    // The first reads the shared 50 tokens; the other three wait one step and start from them.
    // Control (0: never wait): all four start at once and compute the prefix four times.
    EXPECT_EQ(cached, wait_tokens != 0 ? 3 * system.size() : 0u) << wait_tokens;
  }
}

// The race `n` choices ran into: the second request arrives after the first has read the shared
// prompt (within the step it arrived during, or while the first decodes), so there is no prompt
// being read to wait for. The first's KV goes to the tree at admission, not at its end.
TEST_F(EngineTest, ARequestArrivingAfterTheSharedPromptWasReadStartsFromIt) {
  const std::vector<int32_t> system = TokenSequence(50, 420, model_->config().vocab_size);
  EngineRequest first = Request(4, 421, 8), second = Request(4, 422, 3);
  first.prompt.insert(first.prompt.begin(), system.begin(), system.end());
  second.prompt.insert(second.prompt.begin(), system.begin(), system.end());
  for (size_t wait_tokens : {size_t{32}, size_t{0}}) {
    EngineOptions o = Stepped();
    o.shared_prefix_wait_tokens = wait_tokens;
    auto engine = Make(o);
    ASSERT_OK_AND_ASSIGN(RequestId a, engine->Submit(first));
    ASSERT_TRUE(engine->Step());  // the whole prompt (54 tokens, one chunk) and the first token
    ASSERT_TRUE(engine->Step());  // decoding
    ASSERT_OK_AND_ASSIGN(RequestId b, engine->Submit(second));
    ASSERT_OK_AND_ASSIGN(EngineResult got_b, engine->Wait(b));
    ASSERT_OK_AND_ASSIGN(EngineResult got_a, engine->Wait(a));
    EXPECT_EQ(got_a.tokens, Alone(first).tokens);
    EXPECT_EQ(got_b.tokens, Alone(second).tokens);
    // Control (0: never share a running request's KV): the second computes the prefix again.
    EXPECT_EQ(got_b.usage.cached_tokens, wait_tokens != 0 ? system.size() : 0u) << wait_tokens;
  }
}

// Indices of `requests` in the order they produced their first token.
std::vector<size_t> FirstTokenOrder(Engine& engine, std::vector<EngineRequest> requests) {
  std::vector<size_t> order;
  std::vector<RequestId> ids;
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].on_token = [&order, i, first = true](const TokenEvent&) mutable {
      if (first) order.push_back(i);
      first = false;
      return true;
    };
    ids.push_back(*engine.Submit(std::move(requests[i])));
  }
  for (RequestId id : ids) EXPECT_OK(engine.Wait(id));
  return order;
}

size_t RankOf(const std::vector<size_t>& order, size_t index) {
  return std::find(order.begin(), order.end(), index) - order.begin();
}

TEST_F(EngineTest, TenantWithOneRequestIsNotStarvedByATenantWithTwenty) {
  EngineOptions o = Stepped();
  o.max_running = 2;
  o.cache_aware_window = 1;  // arrival order within a tenant (a chance one-token match would reorder)
  std::vector<EngineRequest> requests;
  for (uint32_t i = 0; i < 20; ++i) requests.push_back(Request(12, 20 + i, 4, "busy"));
  requests.push_back(Request(12, 99, 4, "quiet"));
  EXPECT_LT(RankOf(FirstTokenOrder(*Make(o), requests), 20), 2u);
  // Control: the same requests from one tenant are served first come, first served, so the last
  // one submitted starts last — the fairness above is the tenants' doing.
  requests.back().tenant = "busy";
  EXPECT_EQ(RankOf(FirstTokenOrder(*Make(o), requests), 20), 20u);
}

TEST_F(EngineTest, CacheAwareOrderAdmitsTheTenantsCachedPrefixFirst) {
  const size_t vocab = model_->config().vocab_size;
  const std::vector<int32_t> cached = TokenSequence(40, 500, vocab);
  // Four cold requests, then one that continues `cached`, all from tenant t0, one slot.
  std::vector<EngineRequest> requests;
  for (uint32_t i = 0; i < 4; ++i) requests.push_back(Request(12, 510 + i, 2, "t0"));
  EngineRequest warm = Request(4, 520, 2, "t0");
  warm.prompt.insert(warm.prompt.begin(), cached.begin(), cached.end());
  requests.push_back(warm);
  const auto order = [&](size_t window, std::string_view tree_tenant) {
    EngineOptions o = Stepped();
    o.max_running = 1;
    o.cache_aware_window = window;
    auto engine = Make(o);
    EngineRequest prime = Request(1, 0, 0, std::string(tree_tenant));  // prefill only: fills the tree
    prime.prompt = cached;
    EXPECT_OK(engine->Wait(*engine->Submit(prime)));
    EXPECT_EQ(engine->tree().MatchLength(cached, tree_tenant), cached.size());
    return FirstTokenOrder(*engine, requests);
  };
  // The window sees the cached request and takes it first; the others keep their order.
  EXPECT_EQ(order(8, "t0"), (std::vector<size_t>{4, 0, 1, 2, 3}));
  // Controls: first come, first served with a window of one; and another tenant's prefix is no
  // reason to go first (the order is per tenant).
  EXPECT_EQ(order(1, "t0"), (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(order(8, "t1"), (std::vector<size_t>{0, 1, 2, 3, 4}));
}

TEST_F(EngineTest, CacheAwareOrderPassesOverARequestAtMostWindowTimes) {
  const size_t vocab = model_->config().vocab_size;
  const std::vector<int32_t> shared = TokenSequence(40, 600, vocab);
  EngineOptions o = Stepped();
  o.max_running = 1;
  o.cache_aware_window = 3;
  auto engine = Make(o);
  EngineRequest prime = Request(1, 0, 0, "t0");
  prime.prompt = shared;
  ASSERT_OK(engine->Wait(*engine->Submit(prime)));
  // A cold request first, then eight that continue the cached prefix: each would beat it.
  std::vector<EngineRequest> requests{Request(12, 601, 2, "t0")};
  for (uint32_t i = 0; i < 8; ++i) {
    EngineRequest r = Request(4, 610 + i, 2, "t0");
    r.prompt.insert(r.prompt.begin(), shared.begin(), shared.end());
    requests.push_back(std::move(r));
  }
  const std::vector<size_t> got = FirstTokenOrder(*engine, requests);
  EXPECT_EQ(RankOf(got, 0), 3u);  // passed over three times, then taken
  EXPECT_EQ(got.size(), requests.size());
}

TEST_F(EngineTest, PrefillOnlyRequestPutsItsPromptInTheTree) {
  auto engine = Make();
  EngineRequest warm = Request(30, 700, 0, "t0");
  bool called = false;
  warm.on_token = [&](const TokenEvent&) { return called = true; };
  ASSERT_OK_AND_ASSIGN(EngineResult got, engine->Wait(*engine->Submit(warm)));
  EXPECT_EQ(got.finish, FinishReason::kLength);
  EXPECT_TRUE(got.tokens.empty());
  EXPECT_FALSE(called);
  EXPECT_EQ(engine->tree().MatchLength(warm.prompt, "t0"), warm.prompt.size());
  // The next request continuing it reads the whole prompt from the tree and equals a cold run.
  EngineRequest next = Request(5, 701, 4, "t0");
  next.prompt.insert(next.prompt.begin(), warm.prompt.begin(), warm.prompt.end());
  ASSERT_OK_AND_ASSIGN(EngineResult r, engine->Wait(*engine->Submit(next)));
  EXPECT_EQ(r.usage.cached_tokens, warm.prompt.size());
  EXPECT_EQ(r.tokens, Alone(next).tokens);
  // Control: without the warm-up nothing is cached.
  auto cold = Make();
  ASSERT_OK_AND_ASSIGN(EngineResult c, cold->Wait(*cold->Submit(next)));
  EXPECT_EQ(c.usage.cached_tokens, 0u);
}

TEST_F(EngineTest, BackgroundRequestsWaitForInteractiveOnes) {
  EngineOptions o = Stepped();
  o.max_running = 1;
  EngineRequest background = Request(12, 710, 2, "t0");
  background.priority = RequestPriority::kBackground;
  // Submitted first, still admitted last.
  std::vector<EngineRequest> requests{background, Request(12, 711, 2, "t0"), Request(12, 712, 2, "t1")};
  const std::vector<size_t> order = FirstTokenOrder(*Make(o), requests);
  EXPECT_EQ(order.back(), 0u);
  // Control: as interactive it goes first.
  requests[0].priority = RequestPriority::kInteractive;
  EXPECT_EQ(FirstTokenOrder(*Make(o), requests).front(), 0u);
}

TEST_F(EngineTest, BackgroundPrefillGetsWhatInteractiveLeavesOfAStep) {
  EngineOptions o = Stepped();
  o.max_running = 2;
  o.prefill_chunk_tokens = 16;
  o.step_token_budget = 16;
  auto engine = Make(o);
  EngineRequest background = Request(64, 720, 0, "t0");
  background.priority = RequestPriority::kBackground;
  ASSERT_OK_AND_ASSIGN(RequestId ib, engine->Submit(background));
  engine->Step();  // alone: it prefills
  EXPECT_EQ(engine->Stats().background_running, 1u);
  EngineRequest interactive = Request(40, 721, 3, "t1");
  ASSERT_OK_AND_ASSIGN(RequestId ii, engine->Submit(interactive));
  // While the interactive prompt is read, each step's 16 tokens are all its.
  const size_t items_before = engine->Stats().batch_items;
  engine->Step();
  engine->Step();
  EXPECT_EQ(engine->Stats().batch_items - items_before, 2u);
  ASSERT_OK_AND_ASSIGN(EngineResult ri, engine->Wait(ii));
  EXPECT_EQ(ri.tokens, Alone(interactive).tokens);
  ASSERT_OK_AND_ASSIGN(EngineResult rb, engine->Wait(ib));
  EXPECT_EQ(rb.finish, FinishReason::kLength);
  EXPECT_EQ(engine->tree().MatchLength(background.prompt, "t0"), background.prompt.size());
}

TEST_F(EngineTest, InteractiveRequestTakesABackgroundSlotAndTheWorkIsKept) {
  EngineOptions o = Stepped();
  o.max_running = 1;
  o.prefill_chunk_tokens = 16;
  o.step_token_budget = 16;
  auto engine = Make(o);
  EngineRequest background = Request(64, 730, 0, "t0");
  background.priority = RequestPriority::kBackground;
  ASSERT_OK_AND_ASSIGN(RequestId ib, engine->Submit(background));
  engine->Step();
  engine->Step();  // 32 of its 64 tokens read
  ASSERT_OK_AND_ASSIGN(RequestId ii, engine->Submit(Request(10, 731, 3, "t1")));
  engine->Step();
  EngineStats s = engine->Stats();
  EXPECT_EQ(s.running, 1u);
  EXPECT_EQ(s.background_running, 0u);
  EXPECT_EQ(s.background_queued, 1u);
  EXPECT_EQ(s.preemptions, 1u);
  EXPECT_EQ(engine->tree().MatchLength(background.prompt, "t0"), 32u);  // what it read is kept
  ASSERT_OK(engine->Wait(ii));
  ASSERT_OK_AND_ASSIGN(EngineResult rb, engine->Wait(ib));
  EXPECT_EQ(rb.usage.preemptions, 1u);
  EXPECT_EQ(rb.usage.recomputed_tokens, 0u);  // resumed from the tree
  EXPECT_EQ(engine->tree().MatchLength(background.prompt, "t0"), background.prompt.size());
}

TEST_F(EngineTest, MemoryPressurePreemptsBackgroundBeforeInteractive) {
  EngineOptions o = Stepped();
  o.kv_budget_bytes = 70 * BytesPerToken();  // both 20-token prompts fit; both 60-token contexts do not
  o.prefill_chunk_tokens = 64;
  auto engine = Make(o);
  EngineRequest background = Request(20, 740, 40, "alpha"), interactive = Request(20, 741, 40, "beta");
  background.priority = RequestPriority::kBackground;
  ASSERT_OK_AND_ASSIGN(RequestId ib, engine->Submit(background));
  engine->Step();  // the background one is admitted first: "latest admitted" alone would spare it
  ASSERT_OK_AND_ASSIGN(RequestId ii, engine->Submit(interactive));
  ASSERT_OK_AND_ASSIGN(EngineResult ri, engine->Wait(ii));
  ASSERT_OK_AND_ASSIGN(EngineResult rb, engine->Wait(ib));
  EXPECT_EQ(ri.tokens, Alone(interactive).tokens);
  EXPECT_EQ(rb.tokens, Alone(background).tokens);
  EXPECT_EQ(ri.usage.preemptions, 0u);
  EXPECT_GE(rb.usage.preemptions, 1u);
}

TEST_F(EngineTest, PrefillChunksAreSharedAcrossTenants) {
  EngineOptions o = Stepped();
  o.max_running = 4;
  o.prefill_chunk_tokens = 8;
  o.step_token_budget = 8;  // one chunk per step: who gets it is the fair-share order
  auto engine = Make(o);
  std::vector<EngineRequest> requests;
  for (uint32_t i = 0; i < 3; ++i) requests.push_back(Request(40, 40 + i, 2, "busy"));
  requests.push_back(Request(40, 50, 2, "quiet"));
  // First come, first served, busy's three prompts (15 chunks) would go before quiet's first chunk;
  // turns alternate instead.
  EXPECT_LT(RankOf(FirstTokenOrder(*engine, requests), 3), 2u);
}

TEST_F(EngineTest, ShutdownCancelsWorkInFlight) {
  EngineOptions o = Stepped();
  o.max_running = 2;
  o.prefill_chunk_tokens = 8;
  auto engine = Make(o);
  size_t callbacks = 0;
  std::vector<RequestId> ids;
  for (uint32_t i = 0; i < 4; ++i) {
    EngineRequest r = Request(i == 0 ? 4 : 30, 60 + i, 50);
    r.on_token = [&](const TokenEvent&) { return ++callbacks > 0; };
    ids.push_back(*engine->Submit(r));
  }
  for (int i = 0; i < 3; ++i) engine->Step();  // one decoding, one mid-prefill, two queued
  const size_t before = callbacks;
  EXPECT_GT(before, 0u);
  engine->Shutdown();
  EXPECT_EQ(callbacks, before);
  for (RequestId id : ids) {
    ASSERT_OK_AND_ASSIGN(EngineResult got, engine->Wait(id));
    EXPECT_EQ(got.finish, FinishReason::kCancelled);
  }
  EXPECT_EQ(engine->Submit(Request(5, 1, 1)).error().code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(engine->Step());
  engine->Shutdown();  // idempotent
}

TEST_F(EngineTest, EngineConcurrentShutdownWithTheStepThreadLeavesNoCallbackBehind) {
  EngineOptions o;  // with the step thread
  o.max_running = 2;
  auto engine = Make(o);
  std::atomic<bool> shut{false};
  std::atomic<size_t> late_callbacks{0}, delivered{0};
  std::vector<RequestId> ids;
  for (uint32_t i = 0; i < 6; ++i) {
    EngineRequest r = Request(30, 60 + i, 400);
    r.on_token = [&](const TokenEvent&) {
      if (shut) ++late_callbacks;
      ++delivered;
      return true;
    };
    ASSERT_OK_AND_ASSIGN(RequestId id, engine->Submit(r));
    ids.push_back(id);
  }
  while (delivered == 0) std::this_thread::yield();
  engine->Shutdown();
  shut = true;
  for (RequestId id : ids) {
    ASSERT_OK_AND_ASSIGN(EngineResult got, engine->Wait(id));
    EXPECT_TRUE(got.finish == FinishReason::kCancelled || got.finish == FinishReason::kLength) << FinishReasonName(got.finish);
  }
  EXPECT_EQ(late_callbacks, 0u);
  EXPECT_EQ(engine->Submit(Request(5, 1, 1)).error().code(), StatusCode::kFailedPrecondition);
}

TEST_F(EngineTest, ShutdownDrainFinishesEveryAcceptedRequest) {
  for (bool thread : {false, true}) {
    EngineOptions o;
    o.start_thread = thread;
    o.max_running = 2;
    auto engine = Make(o);
    std::vector<RequestId> ids;
    for (uint32_t i = 0; i < 5; ++i) ids.push_back(*engine->Submit(Request(10, 70 + i, 6)));
    engine->Shutdown(ShutdownMode::kDrain);
    for (RequestId id : ids) {
      ASSERT_OK_AND_ASSIGN(EngineResult got, engine->Wait(id));
      EXPECT_EQ(got.finish, FinishReason::kLength);
      EXPECT_EQ(got.tokens.size(), 6u);
    }
  }
}

TEST_F(EngineTest, BadOptionsAreRefused) {
  for (auto bad : {+[](EngineOptions& o) { o.max_running = 0; }, +[](EngineOptions& o) { o.max_queued = 0; },
                   +[](EngineOptions& o) { o.prefill_chunk_tokens = 0; },
                   +[](EngineOptions& o) { o.step_token_budget = o.max_running - 1; }}) {
    EngineOptions o = Stepped();
    bad(o);
    auto engine = Engine::Create(*model_, *tokenizer_, o);
    ASSERT_FALSE(engine.has_value());
    EXPECT_EQ(engine.error().code(), StatusCode::kInvalidArgument);
  }
}

// Many threads submit, wait and cancel at once against the step thread; every request that ran to
// its end has the bits it has alone, and no callback runs for a request after Cancel returned.
TEST_F(EngineTest, EngineConcurrentSubmittersGetExactResults) {
  EngineOptions o;
  o.max_running = 6;
  o.prefill_chunk_tokens = 16;
  o.step_token_budget = 32;
  o.kv_budget_bytes = 200 * BytesPerToken();
  auto engine = Make(o);
  constexpr int kThreads = 6, kPerThread = 4;
  std::vector<EngineRequest> requests;
  std::vector<testing::AloneRun> alone;
  for (int i = 0; i < kThreads * kPerThread; ++i) {
    EngineRequest r = Request(10 + 7 * (i % 5), 200 + (i % 8), 6, kTenants[i % 3]);
    if (i % 2) r.sampling = {.temperature = 0.7f, .top_k = 0, .top_p = 0.9f, .repetition_penalty = 1.0f, .seed = 5};
    alone.push_back(Alone(r));
    requests.push_back(std::move(r));
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kPerThread; ++k) {
        const int i = t * kPerThread + k;
        EngineRequest r = requests[i];
        const bool cancel = i % 7 == 3;
        auto cancel_returned = std::make_shared<std::atomic<bool>>(false);
        r.on_token = [cancel_returned, &failures](const TokenEvent&) {
          if (*cancel_returned) ++failures;
          return true;
        };
        Result<RequestId> id = engine->Submit(r);
        if (!id.has_value()) {
          ++failures;
          continue;
        }
        if (cancel) {
          if (!engine->Cancel(*id).ok()) ++failures;
          *cancel_returned = true;
        }
        Result<EngineResult> got = engine->Wait(*id);
        if (!got.has_value()) {
          ++failures;
        } else if (got->finish == FinishReason::kLength && got->tokens != alone[i].tokens) {
          ++failures;
        } else if (!cancel && got->finish != FinishReason::kLength) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_GT(engine->Stats().max_batch_items, 1u);
}

TEST_F(EngineTest, EngineConcurrentCancelAndShutdownRace) {
  EngineOptions o;
  o.max_running = 4;
  auto engine = Make(o);
  std::vector<RequestId> ids;
  for (uint32_t i = 0; i < 12; ++i) ids.push_back(*engine->Submit(Request(20, 300 + i, 100, kTenants[i % 2])));
  std::thread canceller([&] {
    for (size_t i = 0; i < ids.size(); i += 2) EXPECT_OK(engine->Cancel(ids[i]));
  });
  std::thread stats_reader([&] {
    for (int i = 0; i < 50; ++i) (void)engine->Stats();
  });
  canceller.join();
  stats_reader.join();
  engine->Shutdown();
  for (RequestId id : ids) EXPECT_OK(engine->Wait(id));
}

// ---- fair share, alone ----

TEST(EngineFairShare, QueuesTakeTenantsInTurn) {
  internal::TenantQueues<int> q;
  for (int i = 0; i < 4; ++i) q.PushBack("busy", i);
  q.PushBack("quiet", 100);
  q.PushBack("calm", 200);
  std::vector<int> order;
  while (!q.empty()) order.push_back(q.PopNext());
  EXPECT_EQ(order, (std::vector<int>{0, 200, 100, 1, 2, 3}));  // busy, calm, quiet, then busy's rest

  q.PushBack("a", 1);
  q.PushBack("a", 2);
  q.PushBack("b", 3);
  EXPECT_EQ(q.PopNext(), 1);
  q.PushFront("a", 1);  // put back: first in its line and its tenant's turn again
  EXPECT_EQ(q.PopNext(), 1);
  EXPECT_TRUE(q.Remove("a", 2));
  EXPECT_FALSE(q.Remove("a", 2));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.PopNext(), 3);
}

TEST(EngineFairShare, RoundRobinInterleavesTenantsAndRotates) {
  const std::vector<std::pair<std::string, int>> items = {{"a", 1}, {"a", 2}, {"a", 3}, {"b", 4}, {"c", 5}, {"c", 6}};
  const auto tenant = [](const std::pair<std::string, int>& p) -> std::string_view { return p.first; };
  auto values = [&](size_t rotation) {
    std::vector<int> out;
    for (const auto& p : internal::RoundRobinByTenant(items, tenant, rotation)) out.push_back(p.second);
    return out;
  };
  EXPECT_EQ(values(0), (std::vector<int>{1, 4, 5, 2, 6, 3}));
  EXPECT_EQ(values(1), (std::vector<int>{4, 5, 1, 6, 2, 3}));
  EXPECT_EQ(values(5), (std::vector<int>{5, 1, 4, 6, 2, 3}));
}

}  // namespace
}  // namespace fak
