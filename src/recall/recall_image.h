// Recall image encoding: canonical JSON with a schema name, a version and a checksum over the
// rest (docs/store.md). nlohmann_json stays inside this translation unit's implementation.
#ifndef FAK_SRC_RECALL_RECALL_IMAGE_H_
#define FAK_SRC_RECALL_RECALL_IMAGE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/digest.h"
#include "fak/screen/screen.h"
#include "fak/core/status.h"

namespace fak::internal {

struct ImageSegment {
  std::string id;
  SegmentKind kind = SegmentKind::kUser;
  Digest source;
  uint64_t size_bytes = 0;
  Verdict verdict;
};

struct ImageRecord {
  uint32_t version = 0;
  std::string name;
  Digest chain_id;
  std::string chain;
  std::vector<ImageSegment> segments;
};

std::string EncodeImage(const ImageRecord& image);
// Parses and checks an image file's bytes; errors name `path` and the field at fault.
Result<ImageRecord> DecodeImage(std::string_view bytes, const std::string& path);

Result<SegmentKind> ParseSegmentKind(std::string_view name);

}  // namespace fak::internal

#endif  // FAK_SRC_RECALL_RECALL_IMAGE_H_
