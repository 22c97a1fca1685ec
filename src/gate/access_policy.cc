// AccessPolicy: tenant isolation, with per-range sharing of declared public prefixes.
#include <algorithm>
#include <string>
#include <utility>

#include "fak/gate/resident_claim.h"

namespace fak {

Status AccessPolicy::DeclarePublicPrefix(std::string name, std::vector<int32_t> tokens) {
  if (name.empty()) return InvalidArgument("DeclarePublicPrefix: name must not be empty");
  if (tokens.empty()) return InvalidArgument("DeclarePublicPrefix \"" + name + "\": tokens must not be empty");
  for (const PublicPrefix& p : public_prefixes_) {
    if (p.name == name) return InvalidArgument("DeclarePublicPrefix: \"" + name + "\" is already declared");
  }
  public_prefixes_.push_back(PublicPrefix{std::move(name), std::move(tokens)});
  return Status::Ok();
}

void AccessPolicy::DenyTenant(std::string tenant) {
  if (std::find(denied_tenants_.begin(), denied_tenants_.end(), tenant) == denied_tenants_.end()) {
    denied_tenants_.push_back(std::move(tenant));
  }
}

size_t AccessPolicy::PublicPrefixLength(std::span<const int32_t> context_tokens) const {
  size_t best = 0;
  for (const PublicPrefix& p : public_prefixes_) {
    if (p.tokens.size() > best && p.tokens.size() <= context_tokens.size() &&
        std::equal(p.tokens.begin(), p.tokens.end(), context_tokens.begin())) {
      best = p.tokens.size();
    }
  }
  return best;
}

std::optional<ClaimVerdict> AccessPolicy::Check(const ResidentClaim& claim, const KVManifest& manifest) const {
  if (!IsValidTenant(claim.tenant)) {
    return ClaimVerdict::Refuse(RefuseReason::kTenantDenied, "the claim names no valid tenant");
  }
  if (std::find(denied_tenants_.begin(), denied_tenants_.end(), claim.tenant) != denied_tenants_.end()) {
    return ClaimVerdict::Refuse(RefuseReason::kTenantDenied, "tenant \"" + claim.tenant + "\" is denied by policy");
  }
  if (claim.tenant == manifest.tenant) return std::nullopt;
  // Say nothing about the owner: the detail may reach the claiming tenant.
  if (manifest.sharing != Sharing::kPublicPrefix) {
    return ClaimVerdict::Refuse(RefuseReason::kCrossTenant, "the span is private to another tenant");
  }
  const TokenRange& range = manifest.binding.tokens;
  for (const PublicPrefix& p : public_prefixes_) {
    if (range.end() > p.tokens.size()) continue;
    const std::span<const int32_t> prefix(p.tokens.data(), static_cast<size_t>(range.end()));
    if (SpanDigestOf(prefix) == manifest.binding.span_digest) return std::nullopt;
  }
  return ClaimVerdict::Refuse(RefuseReason::kOutsidePublicPrefix,
                              "span [" + std::to_string(range.from) + ", " + std::to_string(range.end()) +
                                  ") is marked public_prefix but lies inside no declared public prefix");
}

}  // namespace fak
