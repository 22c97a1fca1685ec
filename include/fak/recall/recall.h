// Recall images: a session's transcript persisted as text, so its KV can be rebuilt after the
// process (or the model) is gone (architecture §7).
//
// An image is an ordered list of segments (id, role, SourceDigest, verdict) plus the identity of
// the screen chain that judged them; the segment texts are blobs in a directory BlobStore beside
// the images — except a segment quarantined at Save, whose bytes are never written: it keeps only
// its digest and comes back as its sealed stub (SealedStub), quarantined for good. Save writes every blob (durably) before the image, and the image atomically, so after
// a crash an image is either absent or complete. Load fails closed: every blob is verified against
// its digest and any mismatch, truncation, swap or malformed field is an error — never a partial
// transcript. Every loaded segment is then re-screened by the *current* chain, so a stricter
// policy re-judges old text. PrefillTranscript rebuilds the KV from the admitted text; inside one
// numeric regime it equals the original session's cache bit for bit (Witness.RecallRegenEqualsOriginal).
//
// Thread-safety: a RecallStore may be used from several threads; two Saves of one name race and
// the later rename wins. CollectGarbage excludes Saves while it runs (a reader/writer lock: Saves
// share it), so it never deletes the texts of an image being saved or just acknowledged. Between
// processes: one opener at a time (an exclusive lock on <dir>/LOCK). Format: docs/store.md.
#ifndef FAK_RECALL_RECALL_H_
#define FAK_RECALL_RECALL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/export.h"
#include "fak/store/blob_store.h"
#include "fak/core/digest.h"
#include "fak/session/segment_ledger.h"
#include "fak/model/model.h"
#include "fak/screen/screen.h"
#include "fak/core/status.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak {

// One segment to save: its text is the source of truth.
struct RecallSegment {
  std::string id;  // non-empty, unique within the image
  SegmentKind kind = SegmentKind::kUser;
  std::string text;
};

struct RecalledSegment {
  std::string id;
  SegmentKind kind = SegmentKind::kUser;
  Digest source_digest;  // sha256 of the text saved (verified), or of the sealed text
  std::string text;      // SealedStub(source_digest) when `recorded` quarantined it: its bytes were never kept
  Verdict recorded;  // the verdict stored in the image (under the recorded chain)
  Verdict current;   // the verdict of the chain Load was given; `recorded` again for a sealed segment
};

struct FAK_EXPORT RecalledTranscript {
  std::string name;
  uint32_t format_version = 0;
  Digest recorded_chain_id;    // ScreenChain::id() at Save
  std::string recorded_chain;  // ScreenChain::Describe() at Save
  Digest current_chain_id;     // ScreenChain::id() at Load
  std::vector<RecalledSegment> segments;

  bool chain_changed() const { return recorded_chain_id != current_chain_id; }
  // Segments admitted when saved but quarantined by the current chain.
  size_t n_newly_quarantined() const;
};

struct RecallStoreOptions {
  // Whether every write is fsynced before Save returns. Default: true.
  bool sync = true;
  // Files, fsyncs and renames (images and the blob store) go through this Env. Default: nullptr =
  // Env::Default(). Not owned; must outlive the store.
  Env* env = nullptr;
};

class FAK_EXPORT RecallStore {
 public:
  // Opens (creating if needed) a recall store at `dir`: images in <dir>/images, texts in a
  // directory BlobStore at <dir>/blobs (never evicted: images depend on them). FailedPrecondition
  // naming the directory when another opener (process or object) has it open.
  static Result<std::unique_ptr<RecallStore>> Open(const std::string& dir, const RecallStoreOptions& options = {});

  // Screens each segment with `chain`, stores the texts of the admitted ones (a quarantined one's
  // bytes are never written: the image keeps its digest and verdict), then writes image `name`
  // (replacing any image of that name). Returns the sha256 of the image file. InvalidArgument for a name that is
  // not [A-Za-z0-9._-]{1,128} not starting with '.', or empty/duplicate segment ids. Unavailable
  // when an admitter cannot decide a segment now (a verdict is recorded only once it is made):
  // nothing is written; retry later.
  Result<Digest> Save(std::string_view name, std::span<const RecallSegment> segments, const ScreenChain& chain);
  // Loads and verifies image `name`, then re-screens every segment with `current`. NotFound for
  // no such image; Unsupported for an unknown format version; Corruption for a malformed image;
  // VerificationFailed when any blob is missing or does not match its digest.
  Result<RecalledTranscript> Load(std::string_view name, const ScreenChain& current);

  Result<std::vector<std::string>> ListImages();
  Status RemoveImage(std::string_view name);
  // Removes text blobs no image references; returns how many.
  Result<size_t> CollectGarbage();

  BlobStore& blobs() { return *blobs_; }
  const std::string& dir() const { return dir_; }

 private:
  RecallStore(std::string dir, RecallStoreOptions options, std::unique_ptr<FileLock> lock, std::unique_ptr<BlobStore> blobs)
      : dir_(std::move(dir)), options_(options), lock_(std::move(lock)), blobs_(std::move(blobs)) {}
  Result<std::string> ImagePath(std::string_view name) const;

  std::string dir_;
  RecallStoreOptions options_;
  std::unique_ptr<FileLock> lock_;  // released last
  std::unique_ptr<BlobStore> blobs_;
  // Saves hold it shared from their first blob Put until their image is durable; CollectGarbage
  // holds it exclusively, so the images it reads name every blob it may not delete.
  std::shared_mutex gc_mu_;
};

// Rebuilds a session from text: tokenizes each segment the current chain admitted (in order) with
// `tokenizer` and prefills it into a new ledger over `model` (which must outlive the ledger).
// Quarantined segments are left out, exactly as the write-time bridge leaves them out.
FAK_EXPORT Result<SegmentLedger> PrefillTranscript(const Model& model, const Tokenizer& tokenizer,
                                        const RecalledTranscript& transcript);

}  // namespace fak

#endif  // FAK_RECALL_RECALL_H_
