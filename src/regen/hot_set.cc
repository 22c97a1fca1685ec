// HotSetTracker: decayed access counts per session, and the hot set within a budget.
#include "fak/regen/hot_set.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "src/core/str_cat.h"

namespace fak {
namespace {

std::string SessionKey(const TranscriptRef& t) {
  if (!t.session.empty()) return t.session;
  Digester d;
  for (const Digest& s : t.segments) d.Update(s.bytes.data(), s.bytes.size());
  return internal::StrCat("~", d.Finish().Hex());
}

struct Session {
  TranscriptRef transcript;
  size_t n_tokens = 0;
  double score = 0;  // as of last_ns
  int64_t last_ns = 0;
};

}  // namespace

struct HotSetTracker::State {
  HotSetOptions options;
  mutable std::mutex mu;
  std::unordered_map<std::string, Session> sessions;  // GUARDED_BY(mu)

  double Decayed(const Session& s, int64_t now_ns) const {
    const double age_s = static_cast<double>(std::max<int64_t>(0, now_ns - s.last_ns)) * 1e-9;
    return s.score * std::exp2(-age_s / options.half_life_s);
  }
};

HotSetTracker::HotSetTracker(HotSetOptions options) : state_(std::make_unique<State>()) {
  state_->options = options;
}

HotSetTracker::~HotSetTracker() = default;

void HotSetTracker::Touch(const TranscriptRef& transcript, size_t n_tokens, int64_t now_ns) {
  std::lock_guard<std::mutex> lock(state_->mu);
  Session& s = state_->sessions[SessionKey(transcript)];
  s.score = state_->Decayed(s, now_ns) + 1.0;
  s.last_ns = std::max(s.last_ns, now_ns);
  s.transcript = transcript;
  s.n_tokens = n_tokens;
}

void HotSetTracker::Forget(std::string_view session) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->sessions.erase(std::string(session));
}

double HotSetTracker::Score(std::string_view session, int64_t now_ns) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->sessions.find(std::string(session));
  return it == state_->sessions.end() ? 0.0 : state_->Decayed(it->second, now_ns);
}

size_t HotSetTracker::size() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->sessions.size();
}

std::vector<HotSetTracker::Entry> HotSetTracker::Select(int64_t now_ns, size_t budget_tokens, size_t budget_bytes,
                                                        size_t bytes_per_token) const {
  std::vector<std::pair<std::string, Entry>> all;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    all.reserve(state_->sessions.size());
    for (const auto& [key, s] : state_->sessions) {
      all.push_back({key, Entry{s.transcript, s.n_tokens, state_->Decayed(s, now_ns)}});
    }
  }
  // Highest score first; the key breaks ties so the order is deterministic.
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.second.score != b.second.score ? a.second.score > b.second.score : a.first < b.first;
  });
  std::vector<Entry> out;
  size_t tokens = 0;
  for (auto& [key, e] : all) {
    if (budget_tokens > 0 && tokens + e.n_tokens > budget_tokens) break;
    if (budget_bytes > 0 && bytes_per_token > 0 && (tokens + e.n_tokens) * bytes_per_token > budget_bytes) break;
    tokens += e.n_tokens;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace fak
