// TextStream: generated token ids → the text a caller may show now, honouring stop strings.
//
// Streaming must never show a stop string, nor half of a UTF-8 character: Push holds back the
// tail of the text that could still grow into a stop string, and an incomplete UTF-8 sequence,
// and releases it once it cannot. When a stop string completes, the text before it is released,
// it and everything after it are dropped, and stopped() turns true. The concatenation of every
// Push and Finish result is text(): the reply as the caller sees it.
// Not thread-safe; one per sequence.
#ifndef FAK_TOKENIZER_TEXT_STREAM_H_
#define FAK_TOKENIZER_TEXT_STREAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak {

class FAK_EXPORT TextStream {
 public:
  // Empty stop strings are ignored. `tokenizer` must outlive the stream. `spelled` special tokens
  // are shown as their vocabulary text (Tokenizer::TokenText), where Decode gives them none.
  TextStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings, std::vector<int32_t> spelled = {});

  // Appends `token`'s text; returns what became safe to show (often empty). After a stop, returns
  // empty. InvalidArgument for an id outside the vocabulary (the stream is unchanged).
  Result<std::string> Push(int32_t token);
  // The end of generation: releases what was held back (empty after a stop). Idempotent.
  std::string Finish();

  bool stopped() const { return stopped_; }
  // The stop string that ended the stream, empty when none did.
  const std::string& stopped_by() const { return stopped_by_; }
  const std::string& text() const { return emitted_; }

 private:
  // Bytes at the end of pending_ that must wait: a prefix of some stop string, or an incomplete
  // UTF-8 sequence.
  size_t HeldBack() const;

  const Tokenizer* tokenizer_;
  std::vector<std::string> stops_;
  std::vector<int32_t> spelled_;
  std::string pending_;  // decoded, not yet released
  std::string emitted_;
  std::string stopped_by_;
  bool stopped_ = false;
};

}  // namespace fak

#endif  // FAK_TOKENIZER_TEXT_STREAM_H_
