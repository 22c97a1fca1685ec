// The llama.cpp tokenizer test vectors (tests/data/vocab/): every case must encode to exactly the
// expected ids, and decode back to the input text.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <sstream>

#include "fak/tokenizer/tokenizer.h"
#include "tests/test_util.h"

namespace fak {
namespace {

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// .inp: each text followed by "\n__ggml_vocab_test__\n"; .out: one line of ids per text.
std::vector<Case> ReadCases(const std::string& gguf) {
  std::string inp = ReadAll(gguf + ".inp"), out = ReadAll(gguf + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Case> cases;
  for (size_t pos = 0, next; (next = inp.find(sep, pos)) != std::string::npos; pos = next + sep.size()) {
    cases.push_back({inp.substr(pos, next - pos), {}});
  }
  std::istringstream lines(out);
  std::string line;
  for (size_t i = 0; std::getline(lines, line); ++i) {
    if (i >= cases.size()) break;
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) cases[i].ids.push_back(id);
  }
  return cases;
}

std::string Path(const char* name) { return std::string(FAK_TEST_DATA_DIR) + "/vocab/" + name; }

void CheckAllCases(const char* file, size_t want_cases) {
  std::vector<Case> cases = ReadCases(Path(file));
  ASSERT_EQ(cases.size(), want_cases) << file;
  ASSERT_OK_AND_ASSIGN(auto tok, LoadTokenizerFromGguf(Path(file)));
  size_t passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, tok->Encode(cases[i].text));
    EXPECT_EQ(ids, cases[i].ids) << file << " case " << i << ": '" << cases[i].text << "'";
    passed += ids == cases[i].ids;
    ASSERT_OK_AND_ASSIGN(std::string back, tok->Decode(ids));
    EXPECT_EQ(back, cases[i].text) << file << " round trip, case " << i;
  }
  std::printf("[ vectors  ] %s: %zu/%zu cases match\n", file, passed, cases.size());
}

TEST(TokenizerVectorsTest, LlamaSpmEveryCase) { CheckAllCases("ggml-vocab-llama-spm.gguf", 46); }
TEST(TokenizerVectorsTest, Gpt2BpeEveryCase) { CheckAllCases("ggml-vocab-gpt-2.gguf", 46); }

}  // namespace
}  // namespace fak
