// SpmTokenizer: SentencePiece-style ("llama") tokenization from GGUF metadata — spaces escaped as
// ▁, an optional space prefix, greedy merging of adjacent pieces by vocabulary score, and byte
// fallback to <0xHH> tokens (model-formats.md §5.2). The same class serves tokenizer.json's
// SentencePiece-style BPE (byte_fallback), which ranks listed merges instead of scoring every
// adjacent pair whose concatenation is a token: given `ranks`, a pair merges only when "A B" is a
// listed merge, lowest rank first — HF's BPE model — and the rest is unchanged.
#include <algorithm>
#include <cstdio>
#include <queue>

#include "src/tokenizer/gguf_tokenizers.h"
#include "src/tokenizer/unicode.h"

namespace fak::internal {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 ▁

// Parses "<0xHH>" into its byte; -1 when `text` is not of that form.
int ParseByteToken(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  unsigned v = 0;
  for (char ch : text.substr(3, 2)) {
    v <<= 4;
    if (ch >= '0' && ch <= '9') v |= ch - '0';
    else if (ch >= 'A' && ch <= 'F') v |= ch - 'A' + 10;
    else if (ch >= 'a' && ch <= 'f') v |= ch - 'a' + 10;
    else return -1;
  }
  return static_cast<int>(v);
}

std::vector<std::string> SpmPieces(const Vocab& v) {
  std::vector<std::string> pieces(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string& text = v.texts[i];
    switch (v.types[i]) {
      case kTokenControl: case kTokenUnknown: case kTokenUnused:
        break;  // decode to nothing
      case kTokenUserDefined:
        pieces[i] = text;
        break;
      case kTokenByte: {
        int b = ParseByteToken(text);
        pieces[i] = b >= 0 ? std::string(1, static_cast<char>(b)) : text;
        break;
      }
      default:  // normal and undefined: ▁ stands for a space
        for (size_t p = 0; p < text.size();) {
          if (text.compare(p, kSpace.size(), kSpace) == 0) {
            pieces[i].push_back(' ');
            p += kSpace.size();
          } else {
            pieces[i].push_back(text[p++]);
          }
        }
    }
  }
  return pieces;
}

class SpmTokenizer final : public VocabTokenizer {
 public:
  SpmTokenizer(Vocab vocab, std::vector<std::string> pieces, TextToId ranks = {}, std::string_view rules = "")
      : VocabTokenizer(std::move(vocab), "spm", std::move(pieces),
                       rules.empty() ? std::string_view("spm: score merges, byte fallback <0xHH>") : rules),
        ranks_(std::move(ranks)) {
    for (int b = 0; b < 256; ++b) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
      int32_t id = vocab_.Find(hex);
      if (id < 0) id = vocab_.Find(std::string(1, static_cast<char>(b)));
      byte_ids_[b] = id >= 0 ? id : vocab_.unk;
    }
  }

 protected:
  void EncodeRaw(std::string_view text, bool after_special, std::vector<int32_t>& out) const override;

 private:
  using Symbol = MergeSymbol;
  struct Bigram {
    float score;
    int left, right;
    size_t size;
    // priority_queue pops the largest: higher score first, then the leftmost pair.
    bool operator<(const Bigram& o) const { return score != o.score ? score < o.score : left > o.left; }
  };

  void TryAdd(const std::string& s, const std::vector<Symbol>& sym, int left, int right,
              std::priority_queue<Bigram>& heap) const {
    if (left < 0 || right < 0) return;
    size_t size = sym[left].n + sym[right].n;
    if (!ranks_.empty()) {  // ranked merges; -rank is exact in a float (ranks < 2^24)
      std::string key = s.substr(sym[left].start, sym[left].n) + ' ' + s.substr(sym[right].start, sym[right].n);
      auto it = ranks_.find(key);
      if (it != ranks_.end()) heap.push({-static_cast<float>(it->second), left, right, size});
      return;
    }
    int32_t id = vocab_.Find(std::string_view(s).substr(sym[left].start, size));
    if (id < 0) return;
    heap.push({vocab_.scores[id], left, right, size});
  }

  void Emit(std::string_view piece, std::vector<int32_t>& out) const {
    int32_t id = vocab_.Find(piece);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
    for (char ch : piece) {  // byte fallback
      int32_t b = byte_ids_[static_cast<uint8_t>(ch)];
      if (b >= 0) out.push_back(b);
    }
  }

  int32_t byte_ids_[256];
  TextToId ranks_;  // "A B" -> merge rank; empty: score mode
};

void SpmTokenizer::EncodeRaw(std::string_view text, bool after_special, std::vector<int32_t>& out) const {
  std::string s;
  s.reserve(text.size() * 3 + 3);
  if (vocab_.add_space_prefix && after_special) s.append(kSpace);
  for (char ch : text) {
    if (ch == ' ') s.append(kSpace);
    else s.push_back(ch);
  }
  std::vector<Symbol> sym = SplitIntoMergeSymbols(s);
  if (sym.empty()) return;
  std::priority_queue<Bigram> heap;
  for (size_t i = 1; i < sym.size(); ++i) TryAdd(s, sym, static_cast<int>(i) - 1, static_cast<int>(i), heap);
  while (!heap.empty()) {
    Bigram b = heap.top();
    heap.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    TryAdd(s, sym, l.prev, b.left, heap);
    TryAdd(s, sym, b.left, l.next, heap);
  }
  for (int i = 0; i >= 0; i = sym[i].next) Emit(std::string_view(s).substr(sym[i].start, sym[i].n), out);
}

}  // namespace

std::unique_ptr<Tokenizer> MakeSpmTokenizer(Vocab vocab) {
  std::vector<std::string> pieces = SpmPieces(vocab);
  return std::make_unique<SpmTokenizer>(std::move(vocab), std::move(pieces));
}

std::unique_ptr<Tokenizer> MakeSpmTokenizer(Vocab vocab, const std::vector<std::string>& merges) {
  TextToId ranks;
  ranks.reserve(merges.size());
  std::string rules = "spm: ranked merges, byte fallback <0xHH>; merges:";
  for (size_t i = 0; i < merges.size(); ++i) {
    ranks.emplace(merges[i], static_cast<int32_t>(i));  // a repeated merge keeps its first rank
    rules.append(std::to_string(merges[i].size())).push_back(':');
    rules.append(merges[i]);
  }
  std::vector<std::string> pieces = SpmPieces(vocab);
  return std::make_unique<SpmTokenizer>(std::move(vocab), std::move(pieces), std::move(ranks), rules);
}

}  // namespace fak::internal
