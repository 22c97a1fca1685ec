// HotSetTracker: which contexts are likely to return, so a rollout can rebuild them before cutover.
//
// The score is a recency- and frequency-decayed access count (docs/regen.md). A blue_green Rollout
// asks it for the hot set within a token or byte budget and backfills exactly those.
#ifndef FAK_REGEN_HOT_SET_H_
#define FAK_REGEN_HOT_SET_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "fak/core/export.h"
#include "fak/regen/transcript_ref.h"

namespace fak {

struct HotSetOptions {
  // Half-life of an access's weight in the score. Default: 10 minutes.
  double half_life_s = 600.0;
};

// Ranks transcripts by return probability: score(t) = Σ over accesses i of 2^-((t - t_i) / half_life)
// — a recency- and frequency-decayed access count (docs/regen.md). Each session keeps its latest
// transcript (an agent's history only grows). Thread-safe (one mutex). Cost: O(1) per Touch,
// O(n log n) per Select.
class FAK_EXPORT HotSetTracker {
 public:
  explicit HotSetTracker(HotSetOptions options = {});
  ~HotSetTracker();
  HotSetTracker(const HotSetTracker&) = delete;
  HotSetTracker& operator=(const HotSetTracker&) = delete;

  // Records a use of `transcript` (n_tokens long under the current tokenizer) at `now_ns`.
  void Touch(const TranscriptRef& transcript, size_t n_tokens, int64_t now_ns);
  // Drops a session (ended, or its text was deleted).
  void Forget(std::string_view session);
  double Score(std::string_view session, int64_t now_ns) const;
  size_t size() const;

  struct Entry {
    TranscriptRef transcript;
    size_t n_tokens = 0;
    double score = 0;
  };
  // Highest score first, stopping before the first entry that would push the running total past
  // `budget_tokens` or, when bytes_per_token > 0, past `budget_bytes` (a budget of 0 is unbounded).
  std::vector<Entry> Select(int64_t now_ns, size_t budget_tokens, size_t budget_bytes = 0,
                            size_t bytes_per_token = 0) const;

 private:
  struct State;  // the mutex and the per-session scores
  std::unique_ptr<State> state_;
};

}  // namespace fak

#endif  // FAK_REGEN_HOT_SET_H_
