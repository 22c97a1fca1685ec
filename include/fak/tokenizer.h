// Tokenizer: text bytes ↔ token ids, identified by a digest of its vocabulary and rules.
//
// The TokenizerID is an axis of every cache binding and of the corpus' token cache, so a change of
// tokenizer can never silently reuse ids (architecture §7). Implementations are immutable and
// thread-safe.
#ifndef FAK_TOKENIZER_H_
#define FAK_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fak/digest.h"
#include "fak/status.h"

namespace fak {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text`, without BOS/EOS.
  virtual Result<std::vector<int32_t>> Encode(std::string_view text) const = 0;
  // The bytes the ids stand for (special tokens decode to nothing). InvalidArgument for an id
  // outside the vocabulary.
  virtual Result<std::string> Decode(std::span<const int32_t> ids) const = 0;
  virtual size_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 when none
  virtual int32_t eos_id() const = 0;  // -1 when none
  // sha256 over the kind, vocabulary and rules: the TokenizerID.
  virtual const Digest& id() const = 0;
  virtual std::string_view kind() const = 0;
};

// The embedded default: one token per byte (ids 0..255), BOS = 256, EOS = 257.
std::unique_ptr<Tokenizer> MakeByteTokenizer();

}  // namespace fak

#endif  // FAK_TOKENIZER_H_
