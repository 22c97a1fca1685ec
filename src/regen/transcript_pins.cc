// TranscriptPins: per-session pin sets over a TextCorpus.
#include "fak/regen/transcript_pins.h"

#include <vector>

namespace fak {

TranscriptPins::~TranscriptPins() {
  std::lock_guard lock(mu_);
  for (const auto& [key, texts] : held_) {
    for (const Digest& d : texts) (void)corpus_->UnpinSource(d);  // best effort: nothing to report to
  }
}

Status TranscriptPins::Hold(const TranscriptRef& transcript) {
  if (transcript.session.empty()) return InvalidArgument("TranscriptPins::Hold: the transcript names no session");
  const std::set<Digest> want(transcript.segments.begin(), transcript.segments.end());
  std::lock_guard lock(mu_);
  std::set<Digest>& held = held_[{transcript.tenant, transcript.session}];
  std::vector<Digest> pinned_now;
  for (const Digest& d : want) {
    if (held.contains(d)) continue;
    if (Status s = corpus_->PinSource(d); !s.ok()) {
      for (const Digest& undo : pinned_now) (void)corpus_->UnpinSource(undo);  // nothing changes
      if (held.empty()) held_.erase({transcript.tenant, transcript.session});
      return s.WithContext("holding session '" + transcript.session + "' of tenant '" + transcript.tenant + "'");
    }
    pinned_now.push_back(d);
  }
  Status status;
  for (const Digest& d : held) {
    if (want.contains(d)) continue;
    if (Status s = corpus_->UnpinSource(d); !s.ok() && status.ok()) status = s;
  }
  held = want;
  return status;
}

Status TranscriptPins::Release(std::string_view tenant, std::string_view session) {
  std::lock_guard lock(mu_);
  auto it = held_.find({std::string(tenant), std::string(session)});
  if (it == held_.end()) {
    return NotFound("TranscriptPins::Release: session '" + std::string(session) + "' of tenant '" + std::string(tenant) +
                    "' holds nothing");
  }
  Status status;
  for (const Digest& d : it->second) {
    if (Status s = corpus_->UnpinSource(d); !s.ok() && status.ok()) status = s;
  }
  held_.erase(it);
  return status;
}

size_t TranscriptPins::n_sessions() const {
  std::lock_guard lock(mu_);
  return held_.size();
}

}  // namespace fak
