// ShiftedByteTokenizer: a test and bench stand-in for a tokenizer change. Header-only and free of
// gtest, so benches can use it too.
#ifndef FAK_TESTS_TOKENIZER_SHIFTED_BYTE_TOKENIZER_H_
#define FAK_TESTS_TOKENIZER_SHIFTED_BYTE_TOKENIZER_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/digest.h"
#include "fak/core/status.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak::testing {

// A byte tokenizer with another id layout (id = (byte + shift) mod 256; BOS 256, EOS 257): the same
// text gives other ids, and its TokenizerID differs — the "tokenizer change" of a rollout.
class ShiftedByteTokenizer final : public Tokenizer {
 public:
  explicit ShiftedByteTokenizer(int shift)
      : shift_(shift), id_(Digest::Of("fak.test.shifted_byte.v1 shift " + std::to_string(shift))) {}
  Result<std::vector<int32_t>> Encode(std::string_view text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = (static_cast<unsigned char>(text[i]) + shift_) % 256;
    return ids;
  }
  Result<std::string> Decode(std::span<const int32_t> ids) const override {
    std::string out;
    for (int32_t id : ids) {
      if (id < 0 || id >= 258) return InvalidArgument("shifted byte tokenizer: id out of range");
      if (id < 256) out.push_back(static_cast<char>((id - shift_ + 256) % 256));
    }
    return out;
  }
  size_t vocab_size() const override { return 258; }
  int32_t bos_id() const override { return 256; }
  int32_t eos_id() const override { return 257; }
  const Digest& id() const override { return id_; }
  std::string_view kind() const override { return "shifted_byte"; }

 private:
  int shift_;
  Digest id_;
};

}  // namespace fak::testing

#endif  // FAK_TESTS_TOKENIZER_SHIFTED_BYTE_TOKENIZER_H_
