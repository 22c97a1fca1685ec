// The C++ objects behind fak.Auditor, fak.Certificate and fak.Session (session_bindings.cc binds
// them; the planner and radix-tree bindings make sessions and certificates too).
#ifndef FAK_PYTHON_PY_SESSION_H_
#define FAK_PYTHON_PY_SESSION_H_

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"

namespace fak::python {

// A journal and a signing key. Thread-safe: mu_ serialises journal appends.
class PyAuditor {
 public:
  static std::shared_ptr<PyAuditor> Open(const std::string& journal_path, const std::optional<std::string>& key_path);

  std::mutex mu_;
  std::unique_ptr<Journal> journal_;  // GUARDED_BY(mu_)
  std::optional<SigningKey> key_;     // set by Open; immutable after

 private:
  PyAuditor() = default;
};

// A certificate and the journal file it was issued against (verification re-reads it).
struct PyCertificate {
  DeletionCertificate cert;
  std::string journal_path;
  size_t n_rerotated = 0, n_recomputed = 0;

  bool Verify(const nb::object& public_key, const std::optional<Text>& journal) const;
  CertificateCheck Check(const nb::object& public_key, const std::optional<Text>& journal) const;
};

// One sequence: a SegmentLedger (its cache and named segments) over a shared model. Methods lock
// mu_ and are called with the GIL released; every failure leaves the session as it was.
class PySession {
 public:
  PySession(ModelRef model, std::shared_ptr<PyAuditor> auditor, KVMemory memory = KVMemory::kFull);
  PySession(ModelRef model, std::shared_ptr<PyAuditor> auditor, SegmentLedger ledger, size_t next_id);

  std::vector<float> Prefill(std::vector<int32_t> tokens, const Digest& source, std::string id, SegmentKind kind);
  std::vector<float> Decode(int32_t token);
  // Prefills `prompt` as a new segment and generates onto it. `keep_going` (if set) is asked after
  // each token, without the GIL; false stops the generation there, the session holding what a
  // finished one would. Returns the generated ids.
  std::vector<int32_t> Generate(const std::vector<int32_t>& prompt, size_t max_tokens, const SamplingParams& sampling,
                                const std::vector<int32_t>& stop_tokens, const std::function<bool()>& keep_going);
  std::unique_ptr<PySession> Clone();
  std::unique_ptr<PySession> Prefix(size_t n);
  PyCertificate Evict(const std::string& id, Repair repair, const std::string& reason);
  void Close();
  bool closed() {
    std::lock_guard lock(mu_);
    return !ledger_.has_value();
  }
  // f(const SegmentLedger&) under the lock; FailedPrecondition when closed. Callable with or
  // without the GIL: a busy lock is waited for without it, since Generate takes the GIL while it
  // holds the lock (to look for Ctrl-C).
  template <class F>
  auto With(F&& f) {
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) {
      std::optional<nb::gil_scoped_release> release;
      if (PyGILState_Check()) release.emplace();
      lock.lock();
    }
    return f(Ledger());
  }
  const ModelRef& model() const { return model_; }
  // Keeps a radix-tree lookup's lease (and the tree, `owner`) until the session closes: the cache
  // reads the tree's slabs in place and the lease keeps that path from budget eviction.
  void HoldLease(std::shared_ptr<void> owner, Lease lease);

 private:
  SegmentLedger& Ledger();  // REQUIRES(mu_)
  std::string NextId(const SegmentLedger& ledger);
  static std::vector<SegmentSpec> Specs(const SegmentLedger& ledger);

  const ModelRef model_;
  const std::shared_ptr<PyAuditor> auditor_;  // may be null: evict then refuses
  std::mutex mu_;
  std::shared_ptr<void> lease_owner_;    // the tree lease_ belongs to; released after lease_
  Lease lease_;                          // GUARDED_BY(mu_)
  std::optional<SegmentLedger> ledger_;  // GUARDED_BY(mu_); empty once closed
  size_t next_id_ = 0;                   // GUARDED_BY(mu_)
};

}  // namespace fak::python

#endif  // FAK_PYTHON_PY_SESSION_H_
