// RecallStore: save (screen, blobs, then the image atomically), load (verify everything, fail
// closed, re-screen), list, remove, garbage-collect; PrefillTranscript (regen from text).
#include "fak/recall/recall.h"

#include <algorithm>
#include <mutex>
#include <set>

#include "src/core/json.h"
#include "src/recall/recall_image.h"
#include "src/store/store_files.h"
#include "src/store/store_format.h"

namespace fak {
namespace {

constexpr std::string_view kImagesDir = "images";
constexpr std::string_view kImageSuffix = ".json";
constexpr std::string_view kTmpDir = "tmp";  // image temporaries; emptied on open

bool IsImageName(std::string_view name) {
  if (name.empty() || name.size() > 128 || name.front() == '.') return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool IsPrintableAscii(std::string_view s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

Status CheckSegments(std::span<const RecallSegment> segments) {
  std::set<std::string_view> ids;
  for (size_t i = 0; i < segments.size(); ++i) {
    const std::string& id = segments[i].id;
    if (id.empty() || id.size() > 256 || !IsPrintableAscii(id)) {
      return InvalidArgument("Save: segments[" + std::to_string(i) + "].id must be 1-256 printable ASCII characters");
    }
    if (!ids.insert(id).second) return InvalidArgument("Save: segment id '" + id + "' appears twice");
  }
  return Status::Ok();
}

}  // namespace

size_t RecalledTranscript::n_newly_quarantined() const {
  size_t n = 0;
  for (const RecalledSegment& s : segments) n += !s.recorded.quarantined() && s.current.quarantined();
  return n;
}

Result<std::unique_ptr<RecallStore>> RecallStore::Open(const std::string& dir, const RecallStoreOptions& given) {
  if (dir.empty()) return InvalidArgument("RecallStore::Open: dir is empty");
  RecallStoreOptions options = given;
  if (options.env == nullptr) options.env = Env::Default();
  Env* env = options.env;
  FAK_RETURN_IF_ERROR(internal::EnsureDir(env, dir, options.sync));
  // Before anything is cleaned: tmp/ of a store open elsewhere holds its in-flight saves.
  Result<std::unique_ptr<FileLock>> lock = env->LockFile(internal::JoinPath(dir, internal::kLockFile));
  if (!lock.has_value()) {
    if (lock.error().code() != StatusCode::kFailedPrecondition) return lock.error();
    return FailedPrecondition("recall store '" + dir + "' is in use by another opener (" + std::string(lock.error().message()) +
                              "); close it first");
  }
  FAK_RETURN_IF_ERROR(internal::EnsureDir(env, internal::JoinPath(dir, kImagesDir), options.sync));
  const std::string tmp = internal::JoinPath(dir, kTmpDir);
  FAK_RETURN_IF_ERROR(internal::EnsureDir(env, tmp, options.sync));
  FAK_ASSIGN_OR_RETURN(std::vector<FileInfo> leftovers, env->ListDir(tmp));
  for (const auto& e : leftovers) (void)env->RemoveFile(internal::JoinPath(tmp, e.name));  // never renamed: never saved
  BlobStoreOptions blob_options;
  blob_options.capacity_bytes = UINT64_MAX;  // images depend on every text blob: never evict
  blob_options.sync = options.sync;
  blob_options.env = env;
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<BlobStore> blobs, OpenDirectoryBlobStore(internal::JoinPath(dir, "blobs"), blob_options));
  return std::unique_ptr<RecallStore>(new RecallStore(dir, options, std::move(*lock), std::move(blobs)));
}

Result<std::string> RecallStore::ImagePath(std::string_view name) const {
  if (!IsImageName(name)) {
    return InvalidArgument("recall image name '" + std::string(name) +
                           "' must be 1-128 characters of [A-Za-z0-9._-], not starting with '.'");
  }
  return internal::JoinPath(internal::JoinPath(dir_, kImagesDir), std::string(name) + std::string(kImageSuffix));
}

Result<Digest> RecallStore::Save(std::string_view name, std::span<const RecallSegment> segments, const ScreenChain& chain) {
  FAK_ASSIGN_OR_RETURN(const std::string path, ImagePath(name));
  FAK_RETURN_IF_ERROR(CheckSegments(segments));
  internal::ImageRecord image;
  image.version = internal::kRecallImageVersion;
  image.name = std::string(name);
  image.chain_id = chain.id();
  image.chain = chain.Describe();
  // Screen first: an admitter that cannot decide now (a Redis denylist that is down) leaves a verdict
  // nobody made, which must not be recorded — as "quarantine" it would seal harmless text forever.
  for (const RecallSegment& s : segments) {
    const Digest source = Digest::Of(s.text);
    const Verdict verdict = chain.Screen(ScreenInput{s.text, s.kind, source});
    if (verdict.unavailable()) {
      return Unavailable("recall image '" + std::string(name) + "': segment " + s.id + " (" + source.Hex() +
                         ") cannot be screened now: " + verdict.detector + ": " + verdict.reason +
                         "; nothing was saved, retry later");
    }
    // A quarantined segment keeps only its digest: its bytes are never written (Load gives it back
    // as its sealed stub), so an image cannot become a second copy of sealed text.
    const uint64_t size_bytes = verdict.quarantined() ? 0 : s.text.size();
    image.segments.push_back(internal::ImageSegment{s.id, s.kind, source, size_bytes, verdict});
  }
  std::shared_lock gc_excluded(gc_mu_);  // from the first blob until the image names it durably
  for (size_t i = 0; i < segments.size(); ++i) {
    if (image.segments[i].verdict.quarantined()) continue;
    // Every blob is durable before the image that names it is written.
    FAK_RETURN_IF_ERROR(blobs_->Put(segments[i].text).status());
  }
  const std::string bytes = internal::EncodeImage(image);
  FAK_RETURN_IF_ERROR(internal::AtomicWriteFile(options_.env, internal::JoinPath(dir_, kTmpDir), path, {bytes}, options_.sync)
                          .WithContext("saving recall image '" + std::string(name) + "'"));
  return Digest::Of(bytes);
}

Result<RecalledTranscript> RecallStore::Load(std::string_view name, const ScreenChain& current) {
  FAK_ASSIGN_OR_RETURN(const std::string path, ImagePath(name));
  // An image is JSON: one larger than the JSON limit is refused by its size, unread.
  Result<std::string> bytes = internal::ReadFileAtMost(options_.env, path, internal::JsonLimits::kDefaultMaxBytes,
                                                       StatusCode::kCorruption);
  if (!bytes.has_value()) {
    if (bytes.error().code() == StatusCode::kNotFound) return NotFound("no recall image '" + std::string(name) + "' in '" + dir_ + "'");
    return bytes.error();
  }
  FAK_ASSIGN_OR_RETURN(internal::ImageRecord image, internal::DecodeImage(*bytes, path));
  if (image.name != name) return Corruption(path + ": field 'name' is '" + image.name + "', not the file's name (swapped image?)");
  RecalledTranscript out;
  out.name = image.name;
  out.format_version = image.version;
  out.recorded_chain_id = image.chain_id;
  out.recorded_chain = image.chain;
  out.current_chain_id = current.id();
  for (internal::ImageSegment& s : image.segments) {
    if (s.verdict.quarantined()) {
      // Sealed at Save: no text to verify or re-judge (an image written before sealed segments
      // lost their blob may still name one; it is never read). Quarantined it stays.
      out.segments.push_back(RecalledSegment{std::move(s.id), s.kind, s.source, SealedStub(s.source), s.verdict, s.verdict});
      continue;
    }
    const std::string where = "recall image '" + image.name + "' segment '" + s.id + "'";
    Result<std::string> text = blobs_->Get(s.source);
    if (!text.has_value()) return VerificationFailed(where + ": text " + s.source.Hex() + ": " + text.error().ToString());
    if (text->size() != s.size_bytes) {
      return VerificationFailed(where + ": text is " + std::to_string(text->size()) + " bytes, image says " + std::to_string(s.size_bytes));
    }
    RecalledSegment seg{std::move(s.id), s.kind, s.source, std::move(*text), std::move(s.verdict), {}};
    out.segments.push_back(std::move(seg));
  }
  // Only a fully verified transcript is re-screened and returned.
  for (RecalledSegment& s : out.segments) {
    if (!s.recorded.quarantined()) s.current = current.Screen(ScreenInput{s.text, s.kind, s.source_digest});
  }
  return out;
}

Result<std::vector<std::string>> RecallStore::ListImages() {
  FAK_ASSIGN_OR_RETURN(std::vector<FileInfo> entries, options_.env->ListDir(internal::JoinPath(dir_, kImagesDir)));
  std::vector<std::string> names;
  for (const auto& e : entries) {
    if (!e.is_regular || !e.name.ends_with(kImageSuffix)) continue;
    std::string name = e.name.substr(0, e.name.size() - kImageSuffix.size());
    if (IsImageName(name)) names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

Status RecallStore::RemoveImage(std::string_view name) {
  FAK_ASSIGN_OR_RETURN(const std::string path, ImagePath(name));
  Status removed = options_.env->RemoveFile(path);
  if (removed.code() == StatusCode::kNotFound) return NotFound("no recall image '" + std::string(name) + "' in '" + dir_ + "'");
  FAK_RETURN_IF_ERROR(removed);
  return options_.sync ? options_.env->SyncDir(internal::JoinPath(dir_, kImagesDir)) : Status::Ok();
}

Result<size_t> RecallStore::CollectGarbage() {
  std::unique_lock no_saves(gc_mu_);
  // An image removal whose directory fsync failed is visible but not durable; if GC deleted its
  // texts durably, a power cut would bring back an image without them. Make the listing durable.
  if (options_.sync) FAK_RETURN_IF_ERROR(options_.env->SyncDir(internal::JoinPath(dir_, kImagesDir)));
  std::set<Digest> live;
  FAK_ASSIGN_OR_RETURN(std::vector<std::string> names, ListImages());
  for (const std::string& name : names) {
    FAK_ASSIGN_OR_RETURN(const std::string path, ImagePath(name));
    FAK_ASSIGN_OR_RETURN(std::string bytes, internal::ReadFileAtMost(options_.env, path, internal::JsonLimits::kDefaultMaxBytes,
                                                                      StatusCode::kCorruption));
    // A damaged image blocks collection: its texts might be what a repair needs.
    FAK_ASSIGN_OR_RETURN(internal::ImageRecord image, internal::DecodeImage(bytes, path));
    // A sealed segment's text is not the image's to keep (one saved before sealed segments lost
    // their blob still has it): collected unless another image holds it admitted.
    for (const auto& s : image.segments) {
      if (!s.verdict.quarantined()) live.insert(s.source);
    }
  }
  FAK_ASSIGN_OR_RETURN(std::vector<Digest> held, blobs_->List());
  size_t removed = 0;
  for (const Digest& d : held) {
    if (live.contains(d)) continue;
    FAK_RETURN_IF_ERROR(blobs_->Remove(d));
    ++removed;
  }
  return removed;
}

Result<SegmentLedger> PrefillTranscript(const Model& model, const Tokenizer& tokenizer, const RecalledTranscript& transcript) {
  SegmentLedger ledger(model);
  for (const RecalledSegment& s : transcript.segments) {
    if (s.current.quarantined() || s.text.empty()) continue;
    Result<std::vector<int32_t>> tokens = tokenizer.Encode(s.text);
    if (!tokens.has_value()) return tokens.error().WithContext("tokenizing segment '" + s.id + "'");
    Result<std::vector<float>> logits = ledger.Append(SegmentSpec{s.id, s.kind, std::move(*tokens), s.source_digest});
    if (!logits.has_value()) return logits.error().WithContext("prefilling segment '" + s.id + "'");
  }
  return ledger;
}

}  // namespace fak
