// MemoryBlobStore: every payload held in the index; reads verified like any other backend, so a
// stray write into a held payload is reported rather than served.
#include <mutex>

#include "fak/store/blob_store.h"
#include "src/store/blob_index.h"

namespace fak {
namespace {

class MemoryBlobStore final : public BlobStore {
 public:
  explicit MemoryBlobStore(const BlobStoreOptions& options) : index_(options.capacity_bytes) {}

  Result<Digest> Put(std::string_view bytes) override {
    const Digest digest = Digest::Of(bytes);
    std::lock_guard lock(mu_);
    ++index_.mutable_stats().n_puts;
    if (index_.Find(digest) != nullptr) {
      ++index_.mutable_stats().n_dedup_hits;
      index_.Touch(digest);
      return digest;
    }
    index_.Insert(digest, bytes.size(), std::string(bytes));
    for (const Digest& victim : index_.EvictionVictims(&digest)) {
      index_.CountEviction(index_.Find(victim)->size_bytes);
      index_.Erase(victim);
    }
    return digest;
  }

  Result<std::string> Get(const Digest& digest) override {
    std::string payload;
    {
      std::lock_guard lock(mu_);
      ++index_.mutable_stats().n_gets;
      const internal::BlobIndex::Entry* e = index_.Find(digest);
      if (e == nullptr) return NotFound("blob " + digest.Hex() + " is not in the memory store");
      payload = e->payload;
      index_.Touch(digest);
    }
    if (Digest::Of(payload) != digest) {
      std::lock_guard lock(mu_);
      ++index_.mutable_stats().n_verify_failures;
      return VerificationFailed("blob " + digest.Hex() + " in the memory store does not hash to its digest");
    }
    return payload;
  }

  Result<bool> Contains(const Digest& digest) override {
    std::lock_guard lock(mu_);
    return index_.Find(digest) != nullptr;
  }

  Status Pin(const Digest& digest) override {
    std::lock_guard lock(mu_);
    const internal::BlobIndex::Entry* e = index_.Find(digest);
    if (e == nullptr) return NotFound("Pin: blob " + digest.Hex() + " is not in the store");
    index_.SetPins(digest, e->pins + 1);
    return Status::Ok();
  }

  Status Unpin(const Digest& digest) override {
    std::lock_guard lock(mu_);
    const internal::BlobIndex::Entry* e = index_.Find(digest);
    if (e == nullptr) return NotFound("Unpin: blob " + digest.Hex() + " is not in the store");
    if (e->pins == 0) return FailedPrecondition("Unpin: blob " + digest.Hex() + " is not pinned");
    index_.SetPins(digest, e->pins - 1);
    return Status::Ok();
  }

  Status Remove(const Digest& digest) override {
    std::lock_guard lock(mu_);
    const internal::BlobIndex::Entry* e = index_.Find(digest);
    if (e == nullptr) return NotFound("Remove: blob " + digest.Hex() + " is not in the store");
    if (e->pins > 0) return FailedPrecondition("Remove: blob " + digest.Hex() + " is pinned");
    index_.Erase(digest);
    return Status::Ok();
  }

  Result<std::vector<Digest>> List() override {
    std::lock_guard lock(mu_);
    return index_.Digests();
  }

  BlobStoreStats Stats() const override {
    std::lock_guard lock(mu_);
    return index_.stats();
  }

  std::string_view backend() const override { return "memory"; }

 private:
  mutable std::mutex mu_;
  internal::BlobIndex index_;  // GUARDED_BY(mu_)
};

}  // namespace

std::unique_ptr<BlobStore> MakeMemoryBlobStore(const BlobStoreOptions& options) {
  return std::make_unique<MemoryBlobStore>(options);
}

}  // namespace fak
