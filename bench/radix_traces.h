// Radix-tree workload traces, defined exactly as the Go original's published radix bench so hit
// rates compare one to one: token ids from a 64-bit LCG seeded per segment, vocabulary 49152.
// Used by bench/radix_bench.cc and, for the published hit rates, by tests/session/radix_traces_test.cc.
#ifndef FAK_BENCH_RADIX_TRACES_H_
#define FAK_BENCH_RADIX_TRACES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace fak::bench {

inline constexpr uint64_t kTraceVocab = 49152;

inline std::vector<int32_t> LcgTokens(size_t n, uint64_t seed) {
  uint64_t state = 2463534242ull + seed;
  std::vector<int32_t> out(n);
  for (auto& id : out) {
    state = (state * 1103515245ull + 12345ull) & 0x7fffffffull;
    id = static_cast<int32_t>(state % kTraceVocab);
  }
  return out;
}

inline void Append(std::vector<int32_t>* a, const std::vector<int32_t>& b) { a->insert(a->end(), b.begin(), b.end()); }

struct Trace {
  std::string name;
  std::vector<std::vector<int32_t>> requests;
  size_t published_reused = 0, published_total = 0;  // unbounded tree, first-come order
};

inline Trace FewShot() {
  Trace t{"few-shot", {}, 3840, 4352};
  const auto preamble = LcgTokens(256, 1001);
  for (uint64_t i = 0; i < 16; ++i) {
    auto r = preamble;
    Append(&r, LcgTokens(16, 2000 + i));
    t.requests.push_back(r);
  }
  return t;
}

inline Trace Chat() {
  Trace t{"chat", {}, 1120, 1408};
  auto history = LcgTokens(64, 3001);
  for (uint64_t turn = 0; turn < 8; ++turn) {
    if (turn > 0) Append(&history, LcgTokens(32, 3100 + turn));
    t.requests.push_back(history);
  }
  return t;
}

inline void TreeOfThought(const std::vector<int32_t>& prefix, uint64_t s, int level, Trace* t) {
  if (level == 3) {
    t->requests.push_back(prefix);
    return;
  }
  for (uint64_t f = 0; f < 3; ++f) {
    auto child = prefix;
    Append(&child, LcgTokens(16, s * 7919 + f * 131 + level * 17 + 1));
    TreeOfThought(child, s * 3 + f + 1, level + 1, t);
  }
}

inline Trace TreeOfThought() {
  Trace t{"tree-of-thought", {}, 2336, 3024};
  TreeOfThought(LcgTokens(64, 4001), 1, 0, &t);
  return t;
}

inline Trace Agents() {
  Trace t{"agents", {}, 5512, 6360};
  const auto system = LcgTokens(128, 5001);
  std::vector<std::vector<int32_t>> history(5, system);
  for (uint64_t turn = 1; turn <= 6; ++turn) {
    for (uint64_t a = 0; a < 5; ++a) {
      Append(&history[a], LcgTokens(24, 5100 + 97 * a + turn));
      t.requests.push_back(history[a]);
    }
  }
  return t;
}

inline std::vector<Trace> AllTraces() { return {FewShot(), Chat(), TreeOfThought(), Agents()}; }

inline size_t LongestRequest(const Trace& t) {
  size_t m = 0;
  for (const auto& r : t.requests) m = r.size() > m ? r.size() : m;
  return m;
}

}  // namespace fak::bench

#endif  // FAK_BENCH_RADIX_TRACES_H_
