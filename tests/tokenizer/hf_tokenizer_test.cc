// Tokenizers from Hugging Face tokenizer.json (tests/data/hf/, made by make_hf_fixtures.py): every
// text must encode to exactly the ids the HF `tokenizers` library produced, for byte-level BPE with
// four pre-tokenizer configurations and for SentencePiece-style BPE in three spellings; and the
// same vocabulary read from a GGUF must give the same ids.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <sstream>

#include "fak/tokenizer/tokenizer.h"
#include "tests/test_util.h"

namespace fak {
namespace {

std::string Hf(const std::string& name) { return std::string(FAK_TEST_DATA_DIR) + "/hf/" + name; }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> Texts() {
  std::string inp = ReadAll(Hf("texts.inp"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0, next; (next = inp.find(sep, pos)) != std::string::npos; pos = next + sep.size()) {
    texts.push_back(inp.substr(pos, next - pos));
  }
  return texts;
}

std::vector<std::vector<int32_t>> Expected(const std::string& out_name) {
  std::istringstream lines(ReadAll(Hf(out_name)));
  std::vector<std::vector<int32_t>> all;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream ids(line);
    all.emplace_back();
    for (int32_t id; ids >> id;) all.back().push_back(id);
  }
  return all;
}

// fak's ids equal HF's for every text, and decoding gives the text back.
void CheckAgainstHf(const Tokenizer& tok, const std::string& out_name, bool round_trip = true) {
  std::vector<std::string> texts = Texts();
  std::vector<std::vector<int32_t>> want = Expected(out_name);
  ASSERT_EQ(texts.size(), want.size()) << out_name;
  ASSERT_GE(texts.size(), 60u);
  size_t passed = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, tok.Encode(texts[i]));
    EXPECT_EQ(ids, want[i]) << out_name << " case " << i << ": '" << texts[i] << "'";
    passed += ids == want[i];
    // Control tokens (<s>, </s>, <unk> as added specials) decode to nothing, by design.
    if (!round_trip || texts[i].find("</s>") != std::string::npos) continue;
    ASSERT_OK_AND_ASSIGN(std::string back, tok.Decode(ids));
    EXPECT_EQ(back, texts[i]) << out_name << " round trip, case " << i;
  }
  std::printf("[ hf       ] %s: %zu/%zu texts match the HF tokenizers library\n", out_name.c_str(), passed,
              texts.size());
}

TEST(HfTokenizerTest, ByteLevelBpeMatchesHfForEveryPreTokenizer) {
  for (const char* name : {"gpt2", "llama3", "qwen2", "smollm"}) {
    ASSERT_OK_AND_ASSIGN(auto tok, LoadTokenizerFromHfJson(Hf(std::string("bpe_") + name + ".json")));
    EXPECT_EQ(tok->kind(), "bpe");
    EXPECT_EQ(tok->vocab_size(), 1757u);
    CheckAgainstHf(*tok, std::string("bpe_") + name + ".out");
  }
}

// Byte-level: <|endoftext|> is an added special token, matched whole in text; no BOS (the
// post-processor is ByteLevel, there is no tokenizer_config.json).
TEST(HfTokenizerTest, ByteLevelBpeSpecials) {
  ASSERT_OK_AND_ASSIGN(auto tok, LoadTokenizerFromHfJson(Hf("bpe_gpt2.json")));
  EXPECT_EQ(tok->FindToken("<|endoftext|>"), 1756);
  EXPECT_EQ(tok->bos_id(), -1);
  EXPECT_FALSE(tok->add_bos());
  ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, tok->Encode("a<|endoftext|>b"));
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], 1756);
}

TEST(HfTokenizerTest, SentencePieceStyleMatchesHf) {
  ASSERT_OK_AND_ASSIGN(auto llama, LoadTokenizerFromHfJson(Hf("spm")));  // the directory form
  EXPECT_EQ(llama->kind(), "spm");
  CheckAgainstHf(*llama, "spm_llama.out");
  ASSERT_OK_AND_ASSIGN(auto metaspace, LoadTokenizerFromHfJson(Hf("spm_metaspace.json")));
  CheckAgainstHf(*metaspace, "spm_metaspace.out");
  ASSERT_OK_AND_ASSIGN(auto gemma, LoadTokenizerFromHfJson(Hf("spm_gemma.json")));
  CheckAgainstHf(*gemma, "spm_gemma.out");
  // Metaspace without a prepend is the Replace-only (Gemma) spelling; the Llama one adds a ▁.
  EXPECT_EQ(*metaspace->Encode("Hello world"), *gemma->Encode("Hello world"));
  EXPECT_NE(*llama->Encode("Hello"), *gemma->Encode("Hello"));
}

// tokenizer_config.json beside tokenizer.json gives BOS/EOS and add_bos_token.
TEST(HfTokenizerTest, SpecialIdsFromTokenizerConfig) {
  ASSERT_OK_AND_ASSIGN(auto tok, LoadTokenizerFromHfJson(Hf("spm/tokenizer.json")));
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->add_bos());
  ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, tok->Encode("<s>Hi</s>"));
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);
  // Without the config the post-processor's template still says: BOS <s>, added.
  ASSERT_OK_AND_ASSIGN(auto bare, LoadTokenizerFromHfJson(Hf("spm_metaspace.json")));
  EXPECT_EQ(bare->bos_id(), 1);
  EXPECT_EQ(bare->eos_id(), -1);
  EXPECT_TRUE(bare->add_bos());
}

// The same vocabulary as a GGUF (scores / GGUF merges) and as tokenizer.json (ranked merges) gives
// the same ids on every text — which the HF library also gives.
TEST(HfTokenizerTest, GgufAndTokenizerJsonOfOneVocabularyAgree) {
  ASSERT_OK_AND_ASSIGN(auto spm_gguf, LoadTokenizerFromGguf(Hf("spm.gguf")));
  CheckAgainstHf(*spm_gguf, "spm_llama.out");
  ASSERT_OK_AND_ASSIGN(auto bpe_gguf, LoadTokenizerFromGguf(Hf("bpe.gguf")));
  CheckAgainstHf(*bpe_gguf, "bpe_gpt2.out");
  ASSERT_OK_AND_ASSIGN(auto spm_json, LoadTokenizerFromHfJson(Hf("spm")));
  EXPECT_NE(spm_gguf->id(), spm_json->id());  // other rules (scores vs ranked merges): another TokenizerID
}

// ---- malformed and unsupported tokenizer.json

constexpr const char* kByteLevelTemplate = R"({
  "added_tokens": [ADDED],
  "normalizer": NORMALIZER,
  "pre_tokenizer": PRE,
  "model": {"type": "TYPE", "byte_fallback": false, "vocab": VOCAB, "merges": MERGES}
})";

std::string Make(std::map<std::string, std::string> fields) {
  std::map<std::string, std::string> defaults = {{"ADDED", ""},
                                                 {"NORMALIZER", "null"},
                                                 {"PRE", R"({"type": "ByteLevel", "add_prefix_space": false})"},
                                                 {"TYPE", "BPE"},
                                                 {"VOCAB", R"({"a": 0, "b": 1, "ab": 2})"},
                                                 {"MERGES", R"(["a b"])"}};
  for (auto& [k, v] : fields) defaults[k] = v;
  std::string s = kByteLevelTemplate;
  for (auto& [k, v] : defaults) s.replace(s.find(k), k.size(), v);
  return s;
}

void ExpectParseError(const std::string& json, StatusCode code, const std::string& needle) {
  auto tok = ParseHfTokenizer(json, "", "t.json");
  ASSERT_FALSE(tok.has_value()) << json;
  EXPECT_EQ(tok.error().code(), code) << tok.error().ToString();
  EXPECT_NE(tok.error().message().find(needle), std::string_view::npos)
      << "'" << needle << "' not in " << tok.error().ToString();
}

TEST(HfTokenizerErrorsTest, MinimalFileLoads) {
  ASSERT_OK_AND_ASSIGN(auto tok, ParseHfTokenizer(Make({}), "", "t.json"));
  ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, tok->Encode("ab"));
  EXPECT_EQ(ids, std::vector<int32_t>({2}));
}

TEST(HfTokenizerErrorsTest, MalformedFilesAreCorruption) {
  std::string good = Make({});
  ExpectParseError(good.substr(0, good.size() / 2), StatusCode::kCorruption, "not a JSON object");
  ExpectParseError("[]", StatusCode::kCorruption, "not a JSON object");
  ExpectParseError(R"({"model": 3})", StatusCode::kCorruption, "model");
  ExpectParseError(Make({{"VOCAB", "[1, 2]"}}), StatusCode::kCorruption, "model.vocab is not an object");
  ExpectParseError(Make({{"VOCAB", R"({"a": "zero"})"}}), StatusCode::kCorruption,
                   "model.vocab['a'] is not an integer");
  ExpectParseError(Make({{"VOCAB", R"({"a": 0, "b": 0})"}}), StatusCode::kCorruption, "repeats id 0");
  ExpectParseError(Make({{"VOCAB", R"({"a": 0, "b": 2000000000})"}}), StatusCode::kCorruption, "has id 2000000000");
  ExpectParseError(Make({{"VOCAB", R"({"a": -5})"}}), StatusCode::kCorruption, "is negative");
  ExpectParseError(Make({{"MERGES", R"(["a c"])"}}), StatusCode::kCorruption, "model.merges[0]");
  ExpectParseError(Make({{"MERGES", R"(["ab"])"}}), StatusCode::kCorruption, "no separating space");
  ExpectParseError(Make({{"MERGES", R"([7])"}}), StatusCode::kCorruption, "model.merges[0]");
  ExpectParseError(Make({{"ADDED", R"({"id": "x"})"}}), StatusCode::kCorruption, "added_tokens[0]");
}

TEST(HfTokenizerErrorsTest, UnsupportedConfigurationsAreNamed) {
  ExpectParseError(Make({{"TYPE", "Unigram"}}), StatusCode::kUnsupported, "model.type 'Unigram'");
  ExpectParseError(Make({{"NORMALIZER", R"({"type": "NFKC"})"}}), StatusCode::kUnsupported, "normalizer");
  ExpectParseError(Make({{"PRE", R"({"type": "Whitespace"})"}}), StatusCode::kUnsupported, "must end in ByteLevel");
  ExpectParseError(Make({{"PRE", R"({"type": "ByteLevel", "add_prefix_space": true})"}}), StatusCode::kUnsupported,
                   "add_prefix_space");
  ExpectParseError(
      Make({{"PRE", R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\w+"},
                   "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "use_regex": false}]})"}}),
      StatusCode::kUnsupported, "regex");
  ExpectParseError(Make({{"ADDED", R"({"id": 3, "content": "<x>", "lstrip": true, "special": true})"}}),
                   StatusCode::kUnsupported, "lstrip");
  // SentencePiece-style: ▁ handling fak does not implement.
  std::string spm = Make({{"PRE", "null"}});
  spm.replace(spm.find("\"byte_fallback\": false"), 22, "\"byte_fallback\": true");
  ExpectParseError(spm, StatusCode::kUnsupported, "does not replace ' ' by '▁'");
  for (const char* scheme : {"first", "always"}) {
    std::string meta = spm;
    meta.replace(meta.find("\"pre_tokenizer\": null"), 21,
                 std::string(R"("pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": ")") +
                     scheme + R"(", "split": false})");
    ExpectParseError(meta, StatusCode::kUnsupported, std::string("prepend_scheme '") + scheme + "'");
  }
}

TEST(HfTokenizerErrorsTest, MissingFileIsNotFound) {
  auto tok = LoadTokenizerFromHfJson(Hf("llama"));  // a checkpoint directory without tokenizer.json
  ASSERT_FALSE(tok.has_value());
  EXPECT_EQ(tok.error().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace fak
