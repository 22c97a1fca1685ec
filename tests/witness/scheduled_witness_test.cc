// The serving engine changes no bit: every request's tokens, and the full logit vector each was
// sampled from, equal (max|Δ| == 0) the same request run alone by hand — whether it ran among
// others in one batch, its prompt was prefilled in chunks, its prefix came from the radix tree, or
// it was preempted for memory and recomputed, or it ran as background work that gave its slot to
// interactive requests and resumed. In the active tier (ctest runs this binary once per
// tier). Controls show each condition really occurred and that the logits compared depend on the
// request's own tokens.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fak/engine/engine.h"
#include "fak/model/model.h"
#include "fak/tokenizer/tokenizer.h"
#include "tests/engine/alone.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::MaxAbsDiff;
using testing::TokenSequence;

struct Case {
  std::string tenant;
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  size_t max_tokens;
};

// Three tenants; prompts sharing a system prefix (so the tree serves them), of lengths from one
// chunk to many; greedy and seeded sampling with every knob.
std::vector<Case> MakeCases(size_t vocab) {
  const std::vector<int32_t> system = TokenSequence(48, 1, vocab);
  std::vector<Case> cases;
  for (uint32_t i = 0; i < 12; ++i) {
    Case c;
    c.tenant = std::string("tenant-") + static_cast<char>('a' + i % 3);
    if (i % 2 == 0) c.prompt = system;
    const std::vector<int32_t> own = TokenSequence(3 + 17 * (i % 5), 100 + i, vocab);
    c.prompt.insert(c.prompt.end(), own.begin(), own.end());
    if (i % 3 != 0) c.sampling = {.temperature = 0.9f, .top_k = i % 2 ? 0u : 40u, .top_p = 0.95f,
                                  .repetition_penalty = i % 4 == 1 ? 1.3f : 1.0f, .seed = 7 + i};
    // The penalties that read the history and the bias: the same tokens batched as alone.
    if (i % 3 == 1) {
      c.sampling.presence_penalty = 0.5f;
      c.sampling.frequency_penalty = 0.7f;
      c.sampling.repetition_window = 16;
      c.sampling.logit_bias = {{5, -100.0f}, {9, 3.0f}};
    }
    if (i % 3 == 2) c.sampling.min_p = 0.05f;
    c.max_tokens = 4 + i % 6;
    cases.push_back(std::move(c));
  }
  return cases;
}

// A stepped engine (no thread): the test's Wait calls drive it, deterministically.
EngineOptions Options(size_t max_running, size_t chunk, size_t step_budget, size_t kv_budget) {
  EngineOptions o;
  o.max_running = max_running;
  o.prefill_chunk_tokens = chunk;
  o.step_token_budget = step_budget;
  o.kv_budget_bytes = kv_budget;
  o.start_thread = false;
  return o;
}

struct Scenario {
  const char* name;
  EngineOptions options;
  bool two_waves;  // the second wave repeats the first's prompts followed by their answers: tree hits
  bool mixed_priorities = false;  // every fourth request is background work
};

TEST(Witness, ScheduledEqualsAlone) {
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(testing::ByteModelConfig(), 5));
  const auto tokenizer = MakeByteTokenizer();
  const std::vector<Case> first_wave = MakeCases(model->config().vocab_size);
  std::vector<testing::AloneRun> alone_first;
  for (const Case& c : first_wave) alone_first.push_back(testing::RunAlone(*model, c.prompt, c.sampling, c.max_tokens));
  // Wave two: each first-wave context plus a new turn.
  std::vector<Case> second_wave;
  for (size_t i = 0; i < first_wave.size(); ++i) {
    Case c = first_wave[i];
    c.prompt.insert(c.prompt.end(), alone_first[i].tokens.begin(), alone_first[i].tokens.end());
    const std::vector<int32_t> turn = TokenSequence(5 + i, 300 + static_cast<uint32_t>(i), model->config().vocab_size);
    c.prompt.insert(c.prompt.end(), turn.begin(), turn.end());
    second_wave.push_back(std::move(c));
  }
  std::vector<testing::AloneRun> alone_second;
  for (const Case& c : second_wave) alone_second.push_back(testing::RunAlone(*model, c.prompt, c.sampling, c.max_tokens));

  // K, Kraw, V per layer and KV head in the regime's KV dtype + id
  const ModelConfig& shape = model->config();
  const size_t per_token =
      3 * shape.n_layers * shape.n_kv_heads * shape.head_dim * KVDtypeBytes(model->kv_dtype()) + sizeof(int32_t);
  const Scenario scenarios[] = {
      {"one at a time, whole prompts", Options(1, 4096, 4096, 0), false},
      {"batched, chunked", Options(12, 7, 40, 0), false},
      {"batched, chunked, tree reuse", Options(8, 16, 48, 0), true},
      // Room for about two long contexts: admission waits and running requests are preempted.
      {"tight budget: preemption", Options(8, 16, 64, 420 * per_token), true},
      // Few slots, some background requests: interactive ones take their slots mid-prefill.
      {"mixed priorities: background yields its slot", Options(3, 16, 48, 0), true, true},
  };
  for (const Scenario& s : scenarios) {
    SCOPED_TRACE(s.name);
    ASSERT_OK_AND_ASSIGN(auto engine, Engine::Create(*model, *tokenizer, s.options));
    ASSERT_EQ(engine->tree().BytesPerToken(), per_token);
    size_t cached = 0, preempted = 0, recomputed = 0;
    auto run_wave = [&](const std::vector<Case>& wave, const std::vector<testing::AloneRun>& alone) {
      std::vector<RequestId> ids(wave.size());
      // With mixed priorities the background requests come first and start reading their prompts.
      const auto background = [&](size_t i) { return s.mixed_priorities && i % 4 == 3; };
      std::vector<size_t> submit_order;
      for (size_t i = 0; i < wave.size(); ++i) if (background(i)) submit_order.push_back(i);
      for (size_t i = 0; i < wave.size(); ++i) if (!background(i)) submit_order.push_back(i);
      for (size_t k = 0; k < submit_order.size(); ++k) {
        const size_t i = submit_order[k];
        const Case& c = wave[i];
        EngineRequest r;
        r.tenant = c.tenant;
        r.prompt = c.prompt;
        r.sampling = c.sampling;
        r.max_tokens = c.max_tokens;
        r.record_logits = true;
        r.logprobs = i % 2 == 0;
        r.top_logprobs = i % 4;
        if (background(i)) r.priority = RequestPriority::kBackground;
        ASSERT_OK_AND_ASSIGN(ids[i], engine->Submit(std::move(r)));
        if (background(i) && !background(submit_order[k + 1])) engine->Step();  // the background ones start
      }
      for (size_t i = 0; i < ids.size(); ++i) {
        ASSERT_OK_AND_ASSIGN(EngineResult got, engine->Wait(ids[i]));
        ASSERT_EQ(got.finish, FinishReason::kLength) << "request " << i << ": " << got.error.ToString();
        ASSERT_EQ(got.tokens, alone[i].tokens) << "request " << i;
        ASSERT_EQ(got.logits.size(), alone[i].logits.size()) << "request " << i;
        for (size_t t = 0; t < got.logits.size(); ++t) {
          ASSERT_EQ(MaxAbsDiff(got.logits[t], alone[i].logits[t]), 0.0f) << "request " << i << " token " << t;
        }
        if (i % 2 == 0) {  // log-probabilities are the alone logits' own, bit for bit
          ASSERT_EQ(got.logprobs.size(), got.tokens.size());
          for (size_t t = 0; t < got.logprobs.size(); ++t) {
            const TokenLogprobs want = LogprobsOf(alone[i].logits[t], alone[i].tokens[t], i % 4);
            ASSERT_EQ(got.logprobs[t].chosen.logprob, want.chosen.logprob) << "request " << i << " token " << t;
            ASSERT_EQ(got.logprobs[t].top.size(), want.top.size());
            for (size_t k = 0; k < want.top.size(); ++k) ASSERT_EQ(got.logprobs[t].top[k].token, want.top[k].token);
          }
        } else {
          ASSERT_TRUE(got.logprobs.empty());
        }
        cached += got.usage.cached_tokens;
        preempted += got.usage.preemptions;
        recomputed += got.usage.recomputed_tokens;
      }
    };
    run_wave(first_wave, alone_first);
    if (s.two_waves) run_wave(second_wave, alone_second);
    if (::testing::Test::HasFatalFailure()) return;

    // Non-vacuity: the condition each scenario names really happened.
    const EngineStats stats = engine->Stats();
    if (s.mixed_priorities) {
      EXPECT_EQ(stats.max_batch_items, s.options.max_running);
    } else if (s.options.max_running > 1) {
      EXPECT_GT(stats.max_batch_items, 4u);
      EXPECT_GT(stats.prefill_chunks, 10u);
    } else {
      EXPECT_EQ(stats.max_batch_items, 1u);
    }
    if (s.two_waves) {
      EXPECT_GT(cached, 200u);
    }
    if (s.options.kv_budget_bytes != 0) {
      EXPECT_GT(preempted, 0u);
      EXPECT_GT(recomputed, 0u);
    }
    if (s.mixed_priorities) {
      EXPECT_GT(preempted, 0u);  // slots yielded mid-prefill
    }
  }

  // Control: the compared logits depend on the request's own tokens — one prompt token changed
  // changes them — so a scheduler that mixed up caches, positions or rows could not pass.
  std::vector<int32_t> perturbed = first_wave[1].prompt;
  perturbed[perturbed.size() / 2] = (perturbed[perturbed.size() / 2] + 1) % static_cast<int32_t>(model->config().vocab_size);
  const testing::AloneRun control = testing::RunAlone(*model, perturbed, first_wave[1].sampling, 1);
  EXPECT_GT(MaxAbsDiff(control.logits[0], alone_first[1].logits[0]), 1e-4f);
  // Control: the penalties and the bias of the cases that carry them really change their tokens.
  for (size_t i : {1u, 4u, 7u}) {
    SamplingParams plain = first_wave[i].sampling;
    plain.presence_penalty = plain.frequency_penalty = 0.0f;
    plain.logit_bias.clear();
    EXPECT_NE(testing::RunAlone(*model, first_wave[i].prompt, plain, first_wave[i].max_tokens).tokens, alone_first[i].tokens)
        << "request " << i;
  }
}

}  // namespace
}  // namespace fak
