// Fuzzes the Hugging Face checkpoint readers. The input is config.json, a separator line
// "\n--fak-safetensors--\n", then model.safetensors. The parts go to their parsers directly
// (ParseHfConfig, SafetensorsFile::Parse) and then, as a directory, through the whole
// Model::Load (config validation, tensor lookup, widening, RoPE), context capped at 64.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fak/io/safetensors.h"
#include "fak/model/model.h"
#include "fuzz/fuzz_util.h"

namespace {
volatile uint8_t sink;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto [config, weights] = fak::fuzz::SplitOnce(fak::fuzz::AsText(data, size), "\n--fak-safetensors--\n");
  (void)fak::ParseHfConfig(config);
  auto st = fak::SafetensorsFile::Parse(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(weights.data()), weights.size()), "fuzz.safetensors");
  if (st.has_value()) {
    for (const fak::SafetensorsTensor& t : (*st)->tensors()) {
      FAK_FUZZ_CHECK((*st)->FindTensor(t.name) == &t, t.name);
      std::span<const uint8_t> b = t.bytes();
      if (!b.empty()) sink = b.front() ^ b.back();
    }
  }
  const std::string dir = fak::fuzz::ScratchDir() + "/hf";
  fak::fuzz::ResetDir(dir);
  fak::fuzz::WriteFile(dir + "/config.json", config);
  fak::fuzz::WriteFile(dir + "/model.safetensors", weights);
  fak::ModelOptions options;
  options.n_threads = 1;
  options.max_context = 64;
  auto model = fak::Model::Load(dir, options);
  if (!model.has_value()) return 0;
  const fak::ModelConfig& c = (*model)->config();
  FAK_FUZZ_CHECK(c.Validate().ok(), c.Validate().ToString());
  FAK_FUZZ_CHECK(c.context_length <= 64, std::to_string(c.context_length));
  return 0;
}
