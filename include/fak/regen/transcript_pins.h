// TranscriptPins: the texts of live transcripts are pinned in the corpus, so LRU eviction of the
// text store cannot take the source of a context that a later regen (a rollout's backfill, a lazy
// miss) must rebuild — which would otherwise answer ABSTAIN.
//
// A session (tenant, session name) holds the distinct texts of its latest transcript: Hold pins
// what is new and unpins what the session no longer names; Release unpins all of it when the
// session ends. Each text is pinned once per session holding it (BlobStore pins are counted).
// Pins are the store's: in a directory store they are durable, so a process that dies holding
// them leaves them pinned (Release them from the next one, or remove the blobs). The destructor
// releases every session still held. A pinned text cannot be removed (BlobStore::Remove is
// FailedPrecondition), so release a session before erasing its texts.
//
// Thread-safety: all methods may be called concurrently. The corpus must outlive this object.
#ifndef FAK_REGEN_TRANSCRIPT_PINS_H_
#define FAK_REGEN_TRANSCRIPT_PINS_H_

#include <cstddef>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/regen/transcript_ref.h"
#include "fak/store/text_corpus.h"

namespace fak {

class FAK_EXPORT TranscriptPins {
 public:
  explicit TranscriptPins(TextCorpus& corpus) : corpus_(&corpus) {}
  ~TranscriptPins();
  TranscriptPins(const TranscriptPins&) = delete;
  TranscriptPins& operator=(const TranscriptPins&) = delete;

  // Makes `transcript` its session's held texts. InvalidArgument for an empty session name;
  // NotFound when a text is no longer in the corpus (then nothing changes).
  Status Hold(const TranscriptRef& transcript);
  // Unpins every text the session holds. NotFound when it holds none.
  Status Release(std::string_view tenant, std::string_view session);
  size_t n_sessions() const;

 private:
  using SessionKey = std::pair<std::string, std::string>;  // tenant, session
  TextCorpus* corpus_;
  mutable std::mutex mu_;  // held across the pin calls, so one session's Hold and Release do not interleave
  std::map<SessionKey, std::set<Digest>> held_;  // GUARDED_BY(mu_)
};

}  // namespace fak

#endif  // FAK_REGEN_TRANSCRIPT_PINS_H_
