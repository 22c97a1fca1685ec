// Fuzzes the GGUF container (GgufFile::Parse from bytes): every metadata value through every
// getter, every tensor's byte view (touched at both ends, so ASan sees a view past the input), and
// the tokenizer the metadata describes (LoadTokenizerFromGguf), run on a fixed text.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fak/io/gguf.h"
#include "fak/tokenizer/tokenizer.h"
#include "fuzz/fuzz_util.h"

namespace {

// Every conversion of one value; the results do not matter, only that none misbehaves.
void Walk(const fak::GgufValue& v, int depth) {
  (void)v.ToUint64();
  (void)v.ToInt64();
  (void)v.ToDouble();
  (void)v.ToBool();
  (void)v.ToString();
  if (!v.is_array()) return;
  (void)v.ToInt64Array();
  (void)v.ToFloatArray();
  (void)v.ToStringArray();
  // Elements: the first few and the last (arrays may claim many).
  const size_t n = v.array_size();
  for (size_t i = 0; i < n && i < 4; ++i) {
    auto e = v.At(i);
    if (e.has_value() && depth < 8) Walk(*e, depth + 1);
  }
  if (n > 0) (void)v.At(n - 1);
  (void)v.At(n);  // out of range: an error, not a read
}

volatile uint8_t sink;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = fak::GgufFile::Parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!file.has_value()) return 0;
  const fak::GgufFile& f = **file;
  for (const fak::GgufKeyValue& kv : f.metadata()) {
    Walk(kv.value, 0);
    FAK_FUZZ_CHECK(f.Find(kv.key) != nullptr, std::string(kv.key));
  }
  for (const fak::GgufTensorInfo& t : f.tensors()) {
    (void)t.n_elements();
    FAK_FUZZ_CHECK(f.FindTensor(t.name) != nullptr, std::string(t.name));
    std::span<const uint8_t> b = t.bytes();
    if (!b.empty()) sink = b.front() ^ b.back();
  }
  auto tok = fak::LoadTokenizerFromGguf(f);
  if (!tok.has_value()) return 0;
  auto ids = (*tok)->Encode("Hello world, <s> héllo\n\t 123 ▁x");
  if (ids.has_value()) (void)(*tok)->Decode(*ids);
  return 0;
}
