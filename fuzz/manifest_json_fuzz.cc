// Fuzzes the gate's JSON: a KV manifest (KVManifest::FromJson) when the first byte is even, a KV
// transfer record (KVTransfer::FromJson) when odd. Whatever parses must re-encode (ToJson) and
// parse back to an equal value: the documented promise that emitted JSON always parses.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fak/gate/kv_manifest.h"
#include "fak/gate/kv_transfer.h"
#include "fuzz/fuzz_util.h"

namespace {

template <class T>
void RoundTrip(std::string_view json) {
  auto parsed = T::FromJson(json);
  if (!parsed.has_value()) return;
  auto encoded = parsed->ToJson();
  FAK_FUZZ_CHECK(encoded.has_value(), encoded.error().ToString());
  auto again = T::FromJson(*encoded);
  FAK_FUZZ_CHECK(again.has_value(), again.error().ToString());
  FAK_FUZZ_CHECK(*again == *parsed, *encoded);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view json = fak::fuzz::AsText(data + 1, size - 1);
  if (data[0] % 2 == 0) {
    RoundTrip<fak::KVManifest>(json);
  } else {
    RoundTrip<fak::KVTransfer>(json);
  }
  return 0;
}
