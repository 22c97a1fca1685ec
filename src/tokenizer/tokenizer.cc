// Tokenizer: what every implementation shares.
#include "fak/tokenizer/tokenizer.h"

#include <string>

namespace fak {

Status Tokenizer::CheckPlainSpans(std::string_view text, std::span<const TextSpan> plain) {
  size_t end = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    const TextSpan& s = plain[i];
    if (s.offset < end || s.offset > text.size() || s.size > text.size() - s.offset) {
      return InvalidArgument("plain range " + std::to_string(i) + " [" + std::to_string(s.offset) + ", +" +
                             std::to_string(s.size) + ") is unsorted, overlaps the one before or passes the text's " +
                             std::to_string(text.size()) + " bytes");
    }
    end = s.offset + s.size;
  }
  return Status::Ok();
}

Result<std::vector<int32_t>> Tokenizer::EncodeWithPlain(std::string_view text, std::span<const TextSpan> plain) const {
  FAK_RETURN_IF_ERROR(CheckPlainSpans(text, plain));
  return Encode(text);
}

}  // namespace fak
