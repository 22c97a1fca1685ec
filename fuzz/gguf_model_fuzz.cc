// Fuzzes the whole GGUF model load (Model::Load on a file holding the input: config from metadata,
// weights, RoPE tables), as llama.cpp's OSS-Fuzz target does for its loader. A model that loads
// and is small enough runs one short prefill, so shapes the loader accepted are shapes the forward
// pass can run. The cost per input stays bounded: one thread and a context cap of 64.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fak/model/model.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fak::fuzz::ScratchDir() + "/model.gguf";
  fak::fuzz::WriteFile(path, fak::fuzz::AsText(data, size));
  fak::ModelOptions options;
  options.n_threads = 1;
  options.max_context = 64;
  auto model = fak::Model::Load(path, options);
  if (!model.has_value()) return 0;
  const fak::Model& m = **model;
  const fak::ModelConfig& c = m.config();
  FAK_FUZZ_CHECK(c.Validate().ok(), c.Validate().ToString());
  FAK_FUZZ_CHECK(c.context_length <= 64, std::to_string(c.context_length));
  // Keep a prefill cheap: a few million multiply-adds at most.
  if (m.weights_bytes() > (size_t{4} << 20) || c.n_layers > 8) return 0;
  fak::KVCache cache = m.NewCache();
  const std::vector<int32_t> tokens = {0, static_cast<int32_t>(c.vocab_size - 1)};
  auto logits = m.Prefill(&cache, tokens);
  if (logits.has_value()) FAK_FUZZ_CHECK(logits->size() == c.vocab_size, "logits size");
  return 0;
}
