// Fuzzes ParseHfTokenizer: the input is tokenizer.json, optionally followed by a separator line
// "\n--fak-tokenizer-config--\n" and tokenizer_config.json. A tokenizer that parses encodes and
// decodes a fixed text, and every id it produces must decode.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fak/tokenizer/tokenizer.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto [json, config] = fak::fuzz::SplitOnce(fak::fuzz::AsText(data, size), "\n--fak-tokenizer-config--\n");
  auto tok = fak::ParseHfTokenizer(json, config, "fuzz/tokenizer.json");
  if (!tok.has_value()) return 0;
  const fak::Tokenizer& t = **tok;
  (void)t.FindToken("<s>");
  auto ids = t.Encode("Hello world, héllo 123 <s> \xe2\x96\x81x\n\t  \xf0\x9f\x98\x80 \xff");
  if (!ids.has_value()) return 0;
  for (int32_t id : *ids) FAK_FUZZ_CHECK(id >= 0 && static_cast<size_t>(id) < t.vocab_size(), std::to_string(id));
  auto text = t.Decode(*ids);
  FAK_FUZZ_CHECK(text.has_value(), text.error().ToString());
  return 0;
}
