// BpeTokenizer: GPT-2 style byte-level BPE from GGUF metadata — pre-tokenizer split, bytes mapped
// to printable code points, then merges applied lowest rank first (model-formats.md §5.3).
#include <algorithm>
#include <queue>

#include "src/tokenizer/gguf_tokenizers.h"
#include "src/tokenizer/unicode.h"

namespace fak::internal {
namespace {

// Decoded bytes of each token: the inverse byte map for ordinary tokens (a code point outside the
// map passes through as its UTF-8 bytes), the text verbatim for user-defined tokens, nothing for
// control, unknown and unused tokens.
std::vector<std::string> BpePieces(const Vocab& v) {
  std::vector<std::string> pieces(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    int32_t type = v.types[i];
    if (type == kTokenControl || type == kTokenUnknown || type == kTokenUnused) continue;
    if (type == kTokenUserDefined) {
      pieces[i] = v.texts[i];
      continue;
    }
    for (const CodePoint& c : DecodeUtf8(v.texts[i])) {
      int b = UnicodeToByte(c.cp);
      if (b >= 0) {
        pieces[i].push_back(static_cast<char>(b));
      } else {
        pieces[i].append(v.texts[i], c.offset, c.len);
      }
    }
  }
  return pieces;
}

class BpeTokenizer final : public VocabTokenizer {
 public:
  BpeTokenizer(Vocab vocab, std::vector<std::string> pieces, TextToId ranks, PreTokenizer pre, std::string rules)
      : VocabTokenizer(std::move(vocab), "bpe", std::move(pieces), rules), ranks_(std::move(ranks)), pre_(pre) {}

 protected:
  void EncodeRaw(std::string_view text, bool after_special, std::vector<int32_t>& out) const override {
    std::string mapped;
    for (std::string_view word : PreTokenize(pre_, text)) {
      mapped.clear();
      for (char ch : word) mapped.append(ByteToUnicode(static_cast<uint8_t>(ch)));
      if (pre_ == PreTokenizer::kLlama3) {  // ignore_merges: a whole-word token wins
        int32_t id = vocab_.Find(mapped);
        if (id >= 0) {
          out.push_back(id);
          continue;
        }
      }
      EncodeWord(mapped, out);
    }
  }

 private:
  using Symbol = MergeSymbol;
  struct Pair {
    int32_t rank;
    int left, right;
    size_t size;
    // priority_queue pops the largest: lowest rank first, then the leftmost pair.
    bool operator<(const Pair& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };

  void TryAdd(const std::string& s, const std::vector<Symbol>& sym, int left, int right, std::string& key,
              std::priority_queue<Pair>& heap) const {
    if (left < 0 || right < 0) return;
    key.assign(s, sym[left].start, sym[left].n).push_back(' ');
    key.append(s, sym[right].start, sym[right].n);
    auto it = ranks_.find(key);
    if (it == ranks_.end()) return;
    heap.push({it->second, left, right, sym[left].n + sym[right].n});
  }

  void EncodeWord(const std::string& s, std::vector<int32_t>& out) const;

  TextToId ranks_;  // "A B" -> merge rank
  PreTokenizer pre_;
};

void BpeTokenizer::EncodeWord(const std::string& s, std::vector<int32_t>& out) const {
  std::vector<Symbol> sym = SplitIntoMergeSymbols(s);
  if (sym.empty()) return;
  std::priority_queue<Pair> heap;
  std::string key;
  for (size_t i = 1; i < sym.size(); ++i) TryAdd(s, sym, static_cast<int>(i) - 1, static_cast<int>(i), key, heap);
  while (!heap.empty()) {
    Pair p = heap.top();
    heap.pop();
    Symbol& l = sym[p.left];
    Symbol& r = sym[p.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != p.size || l.next != p.right) continue;  // stale
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = p.left;
    TryAdd(s, sym, l.prev, p.left, key, heap);
    TryAdd(s, sym, p.left, l.next, key, heap);
  }
  for (int i = 0; i >= 0; i = sym[i].next) {
    std::string_view piece = std::string_view(s).substr(sym[i].start, sym[i].n);
    int32_t id = vocab_.Find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char ch : piece) {  // fall back to single-byte tokens, skipping misses
      int32_t b = vocab_.Find(std::string_view(&ch, 1));
      if (b >= 0) out.push_back(b);
    }
  }
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> MakeBpeTokenizer(Vocab vocab, const std::vector<std::string_view>& merges,
                                                    PreTokenizer pre, std::string_view pre_name) {
  TextToId ranks;
  ranks.reserve(merges.size());
  std::string rules = "bpe: pre=" + std::string(pre_name) + "; merges:";
  for (size_t i = 0; i < merges.size(); ++i) {
    std::string_view m = merges[i];
    size_t space = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
    if (space == std::string_view::npos) {
      return Corruption("tokenizer.ggml.merges[" + std::to_string(i) + "] = '" + std::string(m.substr(0, 64)) +
                        "' has no separating space");
    }
    ranks.emplace(std::string(m), static_cast<int32_t>(i));  // a repeated merge keeps its first rank
    rules.append(std::to_string(m.size())).push_back(':');
    rules.append(m);
  }
  std::vector<std::string> pieces = BpePieces(vocab);
  return std::unique_ptr<Tokenizer>(
      std::make_unique<BpeTokenizer>(std::move(vocab), std::move(pieces), std::move(ranks), pre, std::move(rules)));
}

}  // namespace fak::internal
