// Fuzzes tokenization of arbitrary bytes with fixed small tokenizers from tests/data: SPM and
// byte-level BPE, each from GGUF metadata and from tokenizer.json. The first input byte picks the
// tokenizer; the rest is the text to encode. Every id must be in the vocabulary and decode; then
// the same bytes, read as little-endian int32 ids, are decoded (ids out of range must be errors).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fak/tokenizer/tokenizer.h"
#include "fuzz/fuzz_util.h"

namespace {

std::vector<std::unique_ptr<fak::Tokenizer>> LoadAll() {
  const std::string d = FAK_TEST_DATA_DIR "/hf/";
  std::vector<std::unique_ptr<fak::Tokenizer>> out;
  for (const char* name : {"spm.gguf", "bpe.gguf"}) {
    auto t = fak::LoadTokenizerFromGguf(d + name);
    FAK_FUZZ_CHECK(t.has_value(), t.error().ToString());
    out.push_back(std::move(*t));
  }
  for (const char* name : {"spm_gemma.json", "bpe_llama3.json", "bpe_gpt2.json", "bpe_smollm.json"}) {
    auto t = fak::LoadTokenizerFromHfJson(d + name);
    FAK_FUZZ_CHECK(t.has_value(), t.error().ToString());
    out.push_back(std::move(*t));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::unique_ptr<fak::Tokenizer>> tokenizers = LoadAll();
  if (size == 0) return 0;
  const fak::Tokenizer& t = *tokenizers[data[0] % tokenizers.size()];
  const std::string_view text = fak::fuzz::AsText(data + 1, size - 1);
  auto ids = t.Encode(text);
  if (ids.has_value()) {
    for (int32_t id : *ids) FAK_FUZZ_CHECK(id >= 0 && static_cast<size_t>(id) < t.vocab_size(), std::to_string(id));
    auto back = t.Decode(*ids);
    FAK_FUZZ_CHECK(back.has_value(), back.error().ToString());
  }
  std::vector<int32_t> raw((size - 1) / sizeof(int32_t));
  if (!raw.empty()) std::memcpy(raw.data(), data + 1, raw.size() * sizeof(int32_t));
  auto decoded = t.Decode(raw);
  bool in_range = true;
  for (int32_t id : raw) in_range = in_range && id >= 0 && static_cast<size_t>(id) < t.vocab_size();
  if (!in_range) FAK_FUZZ_CHECK(!decoded.has_value(), "an id outside the vocabulary decoded");
  return 0;
}
