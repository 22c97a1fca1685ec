// ScreenChain, QuarantineDenylist and the sealed stub.
#include <mutex>

#include "fak/screen/screen.h"

namespace fak {

std::string SealedStub(const Digest& digest) {
  return "[sealed: quarantined content sha256:" + digest.Hex() + " withheld]";
}

Digest TenantSealKey(std::string_view tenant, const Digest& source) {
  // The tenant's length first, so no (tenant, digest) pair frames the same bytes as another.
  const std::string length = std::to_string(tenant.size()) + ":";
  return Digester().Update("fak.seal.tenant.v1").Update(length).Update(tenant).Update(source.bytes.data(), Digest::kSize).Finish();
}

Result<bool> IsSealedFor(const Denylist& denylist, std::string_view tenant, const Digest& source) {
  FAK_ASSIGN_OR_RETURN(const bool listed, denylist.IsQuarantined(source));
  if (listed) return true;
  return denylist.IsQuarantined(TenantSealKey(tenant, source));
}

Verdict QuarantineDenylist::Screen(const ScreenInput& input) const {
  const Digest digest = input.source_digest ? *input.source_digest : Digest::Of(input.bytes);
  std::shared_lock lock(mu_);
  auto it = entries_.find(digest);
  if (it == entries_.end()) return Verdict::Admit();
  return Verdict::Quarantine("denylist", "source " + digest.Hex() + " is denylisted: " + it->second);
}

Status QuarantineDenylist::Add(const Digest& digest, std::string reason) {
  std::unique_lock lock(mu_);
  entries_[digest] = std::move(reason);
  return Status::Ok();
}

bool QuarantineDenylist::Remove(const Digest& digest) {
  std::unique_lock lock(mu_);
  return entries_.erase(digest) > 0;
}

bool QuarantineDenylist::Contains(const Digest& digest) const {
  std::shared_lock lock(mu_);
  return entries_.contains(digest);
}

std::optional<std::string> QuarantineDenylist::Reason(const Digest& digest) const {
  std::shared_lock lock(mu_);
  auto it = entries_.find(digest);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

size_t QuarantineDenylist::size() const {
  std::shared_lock lock(mu_);
  return entries_.size();
}

std::vector<std::pair<Digest, std::string>> QuarantineDenylist::Entries() const {
  std::shared_lock lock(mu_);
  return {entries_.begin(), entries_.end()};
}

ScreenChain::ScreenChain() : denylist_(std::make_shared<QuarantineDenylist>()) {}

ScreenChain ScreenChain::Default() {
  ScreenChain chain;
  // Names are distinct and non-null, so these cannot fail.
  (void)chain.Add(MakePromptInjectionAdmitter());
  (void)chain.Add(MakeSecretsAdmitter());
  return chain;
}

Status ScreenChain::Add(std::shared_ptr<const Admitter> admitter) {
  if (admitter == nullptr) return InvalidArgument("ScreenChain::Add: admitter is null");
  if (admitter->name() == denylist_->name()) return InvalidArgument("ScreenChain::Add: the name 'denylist' is reserved");
  for (const auto& a : admitters_) {
    if (a->name() == admitter->name()) {
      return InvalidArgument("ScreenChain::Add: an admitter named '" + std::string(a->name()) + "' is already in the chain");
    }
  }
  admitters_.push_back(std::move(admitter));
  return Status::Ok();
}

Status ScreenChain::set_denylist(std::shared_ptr<Denylist> denylist) {
  if (denylist == nullptr) return InvalidArgument("ScreenChain::set_denylist: denylist is null");
  denylist_ = std::move(denylist);
  return Status::Ok();
}

Verdict ScreenChain::Screen(const ScreenInput& input) const {
  ScreenInput in = input;
  if (!in.source_digest) in.source_digest = Digest::Of(in.bytes);  // hash once for the denylist
  Verdict undecided = Verdict::Admit();  // the first Unavailable, kept while others may still decide
  Verdict v = denylist_->Screen(in);
  if (v.quarantined() && !v.unavailable()) return v;
  if (v.unavailable()) undecided = std::move(v);
  for (const auto& a : admitters_) {
    v = a->Screen(in);
    if (v.quarantined() && !v.unavailable()) return v;
    if (v.unavailable() && !undecided.unavailable()) undecided = std::move(v);
  }
  return undecided;
}

Digest ScreenChain::Fingerprint() const {
  Digester d;
  d.Update("fak.screen_chain.v1").UpdatePod(static_cast<uint64_t>(admitters_.size()));
  for (const auto& a : admitters_) {
    const Digest f = a->Fingerprint();
    d.Update(f.bytes.data(), Digest::kSize);
  }
  return d.Finish();
}

std::string ScreenChain::Describe() const {
  std::string out = "denylist";
  for (const auto& a : admitters_) out += ", " + std::string(a->name()) + "/" + std::string(a->version());
  return out;
}

}  // namespace fak
