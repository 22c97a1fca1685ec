// Fuzzes the recall image decoder (internal::DecodeImage: canonical JSON, schema, version,
// checksum, segments). An image that decodes must re-encode to bytes that decode to the same
// segments.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_util.h"
#include "src/recall/recall_image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto image = fak::internal::DecodeImage(fak::fuzz::AsText(data, size), "fuzz/images/x.json");
  if (!image.has_value()) return 0;
  const std::string encoded = fak::internal::EncodeImage(*image);
  auto again = fak::internal::DecodeImage(encoded, "fuzz/images/re-encoded.json");
  FAK_FUZZ_CHECK(again.has_value(), again.error().ToString());
  FAK_FUZZ_CHECK(again->segments.size() == image->segments.size(), encoded);
  FAK_FUZZ_CHECK(again->name == image->name, encoded);
  return 0;
}
