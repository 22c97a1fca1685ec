// ByteTokenizer: the embedded default — every byte is its own token, so any text round-trips.
#include <string>

#include "fak/tokenizer/tokenizer.h"

namespace fak {
namespace {

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kBos = 256, kEos = 257, kVocab = 258;

  ByteTokenizer() : id_(Digest::Of("fak.tokenizer.byte.v1: ids 0-255 = bytes, 256 = BOS, 257 = EOS")) {}

  Result<std::vector<int32_t>> Encode(std::string_view text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }

  Result<std::string> Decode(std::span<const int32_t> ids) const override {
    std::string out;
    out.reserve(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= kVocab) {
        return InvalidArgument("byte tokenizer: id " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                               " is outside [0, 258)");
      }
      if (ids[i] < 256) out.push_back(static_cast<char>(ids[i]));
    }
    return out;
  }

  size_t vocab_size() const override { return kVocab; }
  int32_t bos_id() const override { return kBos; }
  int32_t eos_id() const override { return kEos; }
  const Digest& id() const override { return id_; }
  std::string_view kind() const override { return "byte"; }

 private:
  Digest id_;
};

}  // namespace

std::unique_ptr<Tokenizer> MakeByteTokenizer() { return std::make_unique<ByteTokenizer>(); }

}  // namespace fak
