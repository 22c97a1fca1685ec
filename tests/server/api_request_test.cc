// The server's pieces below HTTP: the request parser's policy (what is accepted, what is refused
// and which parameter is named), the API key file, and the Prometheus text of the metrics.
// tests/server/test_server.py drives the whole server over HTTP.
#include "src/server/api_request.h"

#include <gtest/gtest.h>

#include <string>

#include "src/server/metrics.h"
#include "src/server/server.h"

namespace fak::internal {
namespace {

ApiRequestError Refusal(ApiEndpoint endpoint, std::string_view body) {
  ApiRequest request;
  ApiRequestError error;
  EXPECT_FALSE(ParseApiRequest(endpoint, body, &request, &error)) << body;
  EXPECT_FALSE(error.message.empty());
  return error;
}

TEST(ApiRequest, ParsesToolsAndToolCallHistory) {
  ApiRequest r;
  ApiRequestError error;
  ASSERT_TRUE(ParseApiRequest(ApiEndpoint::kChatCompletions,
                              R"({"model": "m", "messages": [{"role": "user", "content": "weather?"},
                                  {"role": "assistant", "content": null, "refusal": null, "tool_calls": [{"id": "call_1", "type": "function",
                                   "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                                  {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "21C"}],
                                  "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d", "strict": true,
                                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
                                  "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "parallel_tool_calls": false})",
                              &r, &error))
      << error.message;
  ASSERT_EQ(r.messages.size(), 3u);
  ASSERT_EQ(r.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[1].content, "");
  EXPECT_EQ(r.messages[1].tool_calls[0].id, "call_1");
  EXPECT_EQ(r.messages[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.messages[1].tool_calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ(r.messages[2].tool_call_id, "call_1");
  EXPECT_EQ(r.messages[2].name, "get_weather");
  ASSERT_EQ(r.tools.functions.size(), 1u);
  EXPECT_EQ(r.tools.choice, ToolChoice::kNamed);
  EXPECT_EQ(r.tools.named, "get_weather");
  EXPECT_FALSE(r.tools.parallel);
  EXPECT_TRUE(r.tools.forced());
  EXPECT_NE(r.tools.tools_json.find("\"description\":\"d\""), std::string::npos);
  // none: tools given but not offered.
  ASSERT_TRUE(ParseApiRequest(ApiEndpoint::kChatCompletions,
                              R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "tool_choice": "none",
                                  "tools": [{"type": "function", "function": {"name": "f"}}]})",
                              &r, &error));
  EXPECT_FALSE(r.tools.active());
  // Completions take no tools.
  EXPECT_EQ(Refusal(ApiEndpoint::kCompletions, R"({"model": "m", "prompt": "p", "tools": [{"type": "function", "function": {"name": "f"}}]})").param,
            "tools");
}

TEST(ApiRequest, ParsesEveryImplementedChatField) {
  ApiRequest r;
  ApiRequestError error;
  ASSERT_TRUE(ParseApiRequest(ApiEndpoint::kChatCompletions,
                              R"({"model": "m", "messages": [{"role": "system", "content": "s"},
                                  {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
                                  "max_completion_tokens": 9, "temperature": 0, "top_p": 0.5, "seed": -1,
                                  "stop": ["x", "y"], "n": 1, "stream": true, "stream_options": {"include_usage": true},
                                  "user": "u", "presence_penalty": 0.5, "frequency_penalty": -1, "logprobs": true,
                                  "top_logprobs": 3, "top_k": 40, "min_p": 0.1, "repetition_penalty": 1.2,
                                  "logit_bias": {"7": -100, "12": 2.5}, "metadata": {"k": "v"}, "store": false,
                                  "service_tier": "auto", "parallel_tool_calls": true})",
                              &r, &error))
      << error.message;
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, ChatRole::kSystem);
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(r.max_tokens, 9u);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.seed, ~uint64_t{0});
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(r.stream && r.include_usage);
  EXPECT_EQ(r.sampling.presence_penalty, 0.5f);
  EXPECT_EQ(r.sampling.frequency_penalty, -1.0f);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3u);
  EXPECT_EQ(r.sampling.top_k, 40u);
  EXPECT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_EQ(r.sampling.repetition_penalty, 1.2f);
  EXPECT_EQ(r.sampling.logit_bias, (std::vector<std::pair<int32_t, float>>{{12, 2.5f}, {7, -100.0f}}));
}

TEST(ApiRequest, CompletionLogprobsIsACountAndNChoosesChoices) {
  ApiRequest r;
  ApiRequestError error;
  ASSERT_TRUE(ParseApiRequest(ApiEndpoint::kCompletions, R"({"model": "m", "prompt": "p", "logprobs": 5, "n": 3})", &r, &error))
      << error.message;
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 5u);
  EXPECT_EQ(r.n, 3u);
  EXPECT_FALSE(r.seed.has_value());  // the server draws one
}

TEST(ApiRequest, CompletionDefaults) {
  ApiRequest r;
  ApiRequestError error;
  ASSERT_TRUE(ParseApiRequest(ApiEndpoint::kCompletions, R"({"model": "m", "prompt": "p", "stop": "s"})", &r, &error));
  EXPECT_EQ(r.prompt, "p");
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_EQ(r.sampling.temperature, 1.0f);  // OpenAI's default
  EXPECT_EQ(r.stop, std::vector<std::string>{"s"});
  EXPECT_FALSE(r.stream);
}

TEST(ApiRequest, RefusalsNameTheParameter) {
  const auto chat = [](std::string fields) {
    return R"({"model": "m", "messages": [{"role": "user", "content": "x"}], )" + fields + "}";
  };
  const std::pair<std::string, std::string> cases[] = {
      {chat(R"("max_tokens": "8")"), "max_tokens"},
      {chat(R"("max_tokens": 0)"), "max_tokens"},
      {chat(R"("max_tokens": 1e300)"), "max_tokens"},
      {chat(R"("max_tokens": 123456789012345678901234567890)"), "max_tokens"},
      {chat(R"("temperature": 2.5)"), "temperature"},
      {chat(R"("top_p": 0)"), "top_p"},
      {chat(R"("seed": 1.5)"), "seed"},
      {chat(R"("n": 0)"), "n"},
      {chat(R"("n": 17)"), "n"},
      {chat(R"("top_logprobs": 2)"), "top_logprobs"},
      {chat(R"("logprobs": true, "top_logprobs": 21)"), "top_logprobs"},
      {chat(R"("logprobs": 3)"), "logprobs"},
      {chat(R"("top_k": -1)"), "top_k"},
      {chat(R"("min_p": 1.5)"), "min_p"},
      {chat(R"("repetition_penalty": 0)"), "repetition_penalty"},
      {chat(R"("presence_penalty": 2.5)"), "presence_penalty"},
      {chat(R"("logit_bias": {"x": 1})"), "logit_bias.x"},
      {chat(R"("logit_bias": {"-3": 1})"), "logit_bias.-3"},
      {chat(R"("logit_bias": {"3": 101})"), "logit_bias.3"},
      {chat(R"("user": 3)"), "user"},
      {chat(R"("echo": true)"), "echo"},
      {chat(R"("audio": {})"), "audio"},
      {chat(R"("stop": ["a", "b", "c", "d", "e"])"), "stop"},
      {chat(R"("stop": "")"), "stop"},
      {chat(R"("stream": 1)"), "stream"},
      {chat(R"("stream_options": {"include_usage": true})"), "stream_options"},
      {chat(R"("max_token": 8)"), "max_token"},
      {chat(R"("tools": [])"), "tools"},
      {chat(R"("tools": [{"type": "function", "function": {"name": "a b"}}])"), "tools[0].function.name"},
      {chat(R"("tools": [{"type": "code_interpreter"}])"), "tools[0]"},
      {chat(R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string", "pattern": "x"}}}])"),
       "tools[0].function.parameters"},
      {chat(R"("tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}])"),
       "tools[1].function.name"},
      {chat(R"("tool_choice": "required")"), "tool_choice"},
      {chat(R"("tool_choice": "sometimes", "tools": [{"type": "function", "function": {"name": "f"}}])"), "tool_choice"},
      {chat(R"("tool_choice": {"type": "function", "function": {"name": "g"}}, "tools": [{"type": "function", "function": {"name": "f"}}])"),
       "tool_choice"},
      {chat(R"("tool_choice": "required", "tools": [{"type": "function", "function": {"name": "f"}}], "response_format": {"type": "json_object"})"),
       "tool_choice"},
      {chat(R"("parallel_tool_calls": 1)"), "parallel_tool_calls"},
      {R"({"model": "m", "messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"arguments": "{}"}}]}]})",
       "messages[0].tool_calls[0].function"},
      {R"({"model": "m", "messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "web", "function": {"name": "f"}}]}]})",
       "messages[0].tool_calls[0].type"},
      {R"({"model": "m", "messages": [{"role": "assistant", "content": null, "function_call": {"name": "f"}}]})", "messages[0].function_call"},
      {R"({"model": "m", "messages": [{"role": "assistant", "content": null}]})", "messages[0].content"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x", "tool_calls": []}]})", "messages[0].tool_calls"},
      {R"({"model": "m", "messages": [{"role": "robot", "content": "x"}]})", "messages[0].role"},
      {R"({"model": "m", "messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "messages[0].content"},
      {R"({"model": "m", "messages": []})", "messages"},
      {R"({"messages": [{"role": "user", "content": "x"}]})", "model"},
      {R"({"model": "m"})", "messages"},
      {R"({"model": 3, "messages": [{"role": "user", "content": "x"}]})", "model"},
  };
  for (const auto& [body, param] : cases) EXPECT_EQ(Refusal(ApiEndpoint::kChatCompletions, body).param, param) << body;
  EXPECT_EQ(Refusal(ApiEndpoint::kCompletions, R"({"model": "m", "prompt": [1, 2]})").param, "prompt");
  EXPECT_EQ(Refusal(ApiEndpoint::kCompletions, R"({"model": "m", "prompt": "p", "messages": []})").param, "messages");
  for (std::string_view body : {"", "{", "[]", "null", "{\"model\": \"\xff\"}"})
    EXPECT_EQ(Refusal(ApiEndpoint::kCompletions, body).param, "") << body;
}

// Sampling values are checked as the floats the sampler uses (SamplingFloat): a double that is in
// range but becomes 0 or a subnormal float is refused by name here, as in C, Python and the CLI.
TEST(ApiRequest, SamplingValuesAreCheckedAsFloats) {
  const auto chat = [](std::string fields) {
    return R"({"model": "m", "messages": [{"role": "user", "content": "x"}], )" + fields + "}";
  };
  const std::pair<std::string, std::string> cases[] = {
      {chat(R"("top_p": 5e-324)"), "top_p"},
      {chat(R"("top_p": 1e-40)"), "top_p"},
      {chat(R"("temperature": 1e-50)"), "temperature"},
      {chat(R"("temperature": 1e-39)"), "temperature"},
  };
  for (const auto& [body, param] : cases) {
    const ApiRequestError error = Refusal(ApiEndpoint::kChatCompletions, body);
    EXPECT_EQ(error.param, param) << body;
    EXPECT_NE(error.message.find("normal float"), std::string::npos) << error.message;
  }
  // Control: small values that are normal floats, and 0 for greedy, are accepted as given.
  ApiRequest r;
  ApiRequestError error;
  ASSERT_TRUE(ParseApiRequest(ApiEndpoint::kChatCompletions, chat(R"("top_p": 1e-30, "temperature": 1e-30)"), &r, &error))
      << error.message;
  EXPECT_EQ(r.sampling.top_p, 1e-30f);
  EXPECT_EQ(r.sampling.temperature, 1e-30f);
  EXPECT_TRUE(r.sampling.Validate().ok());
  ASSERT_TRUE(ParseApiRequest(ApiEndpoint::kChatCompletions, chat(R"("temperature": 0)"), &r, &error)) << error.message;
  EXPECT_EQ(r.sampling.temperature, 0.0f);
}

TEST(ApiKeys, ParsesKeysAndRefusesBadLines) {
  Result<ApiKeys> keys = ParseApiKeys("# comment\n\nkey-a alice\r\n  key-b bob\n");
  ASSERT_TRUE(keys.has_value()) << keys.error().ToString();
  EXPECT_EQ(*keys, (ApiKeys{{"key-a", "alice"}, {"key-b", "bob"}}));
  for (std::string_view bad : {"lonely\n", "k t extra\n", "k a\nk b\n", "k bad$tenant\n"})
    EXPECT_FALSE(ParseApiKeys(bad).has_value()) << bad;
}

TEST(ServerMetrics, RendersCountersAndCumulativeHistograms) {
  ServerMetrics m;
  m.CountRequest("t\"1", "/v1/completions", 200);
  RequestUsage usage;
  usage.prompt_tokens = 10;
  usage.cached_tokens = 4;
  usage.generated_tokens = 3;
  RequestTimings timings;
  timings.submitted_ns = 0;
  timings.first_token_ns = 20'000'000;              // 20 ms
  timings.token_ns = {20'000'000, 22'000'000, 40'000'000};  // 2 ms, 18 ms
  m.CountGeneration("t1", usage, timings);
  const std::string text = m.Render(EngineSnapshot{});
  EXPECT_NE(text.find(R"(fak_requests_total{tenant="t\"1",endpoint="/v1/completions",status="200"} 1)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(fak_cached_tokens_total{tenant="t1"} 4)"), std::string::npos);
  EXPECT_NE(text.find(R"(fak_time_to_first_token_seconds_bucket{le="0.01"} 0)"), std::string::npos);
  EXPECT_NE(text.find(R"(fak_time_to_first_token_seconds_bucket{le="0.025"} 1)"), std::string::npos);
  EXPECT_NE(text.find(R"(fak_inter_token_latency_seconds_bucket{le="0.0025"} 1)"), std::string::npos);
  EXPECT_NE(text.find(R"(fak_inter_token_latency_seconds_bucket{le="0.025"} 2)"), std::string::npos);
  EXPECT_NE(text.find(R"(fak_inter_token_latency_seconds_bucket{le="+Inf"} 2)"), std::string::npos);
  EXPECT_NE(text.find("fak_inter_token_latency_seconds_count 2\n"), std::string::npos);
}

}  // namespace
}  // namespace fak::internal
