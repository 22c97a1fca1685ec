// Dispatch: fills the table of every registered tier this CPU supports, picks one, and lets callers
// switch with a Status. A tier the CPU lacks is never filled: its fill function is compiled with
// that tier's flags and may itself use the instructions the CPU lacks.
#include "kernels/dispatch.h"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>

#include "kernels/tier_registry.h"

namespace fak::kernels {
namespace {

const KernelTierSpec& Spec(Tier tier) { return *RegisteredTiers()[static_cast<size_t>(tier)]; }

// "scalar, avx2, ..." of `tiers`.
std::string JoinNames(const std::vector<Tier>& tiers) {
  std::string s;
  for (Tier t : tiers) {
    if (!s.empty()) s += ", ";
    s += TierName(t);
  }
  return s;
}

Status UnsupportedTier(Tier tier, std::string_view what) {
  const CpuFeatures missing = DetectCpuFeatures().Missing(Spec(tier).requires_features);
  return Unsupported(std::string(what) + ": this CPU/OS lacks " + missing.Summary() + " (it supports " +
                     JoinNames(SupportedTiers()) + ")");
}

struct Tables {
  std::unique_ptr<KernelTable[]> by_tier;  // by registry index; only supported tiers are filled
  Status env_status;
  std::atomic<const KernelTable*> active{nullptr};

  Tables() : by_tier(new KernelTable[RegisteredTiers().size()]()) {
    for (Tier t : SupportedTiers()) {
      KernelTable& table = by_tier[static_cast<size_t>(t)];
      Spec(t).fill(&table);
      table.tier = t;
      table.name = Spec(t).name;
    }
    Tier chosen = BestTierOn(DetectCpuFeatures());
    if (const char* env = std::getenv("FAK_KERNEL_TIER"); env != nullptr && *env != '\0') {
      Result<Tier> parsed = ParseTier(env);
      if (!parsed.has_value()) {
        env_status = parsed.error().WithContext("FAK_KERNEL_TIER");
      } else if (!TierSupported(*parsed)) {
        env_status = UnsupportedTier(*parsed, std::string("FAK_KERNEL_TIER=") + env);
      } else {
        chosen = *parsed;
      }
    }
    active.store(&by_tier[static_cast<size_t>(chosen)]);
  }
};

Tables& GetTables() {
  static Tables tables;
  return tables;
}

}  // namespace

const KernelTable& Active() { return *GetTables().active.load(std::memory_order_acquire); }
Tier ActiveTier() { return Active().tier; }

bool TierSupportedOn(Tier tier, const CpuFeatures& features) {
  return features.HasAll(Spec(tier).requires_features);
}

Tier BestTierOn(const CpuFeatures& features) {
  Tier best = Tier::kScalar;
  for (Tier t : RegisteredTierList())
    if (TierSupportedOn(t, features)) best = t;
  return best;
}

bool TierSupported(Tier tier) { return TierSupportedOn(tier, DetectCpuFeatures()); }

std::vector<Tier> RegisteredTierList() {
  std::vector<Tier> tiers;
  for (size_t i = 0; i < RegisteredTiers().size(); ++i) tiers.push_back(static_cast<Tier>(i));
  return tiers;
}

std::vector<Tier> SupportedTiers() {
  std::vector<Tier> tiers;
  for (Tier t : RegisteredTierList())
    if (TierSupported(t)) tiers.push_back(t);
  return tiers;
}

std::string_view TierName(Tier tier) { return Spec(tier).name; }

Result<Tier> ParseTier(std::string_view name) {
  for (Tier t : RegisteredTierList())
    if (name == TierName(t)) return t;
  return InvalidArgument("unknown kernel tier '" + std::string(name) + "' (this build has " +
                         JoinNames(RegisteredTierList()) + ")");
}

Result<const KernelTable*> TableFor(Tier tier) {
  if (!TierSupported(tier)) return UnsupportedTier(tier, "kernel tier " + std::string(TierName(tier)));
  return &GetTables().by_tier[static_cast<size_t>(tier)];
}

Status SetTier(Tier tier) {
  FAK_ASSIGN_OR_RETURN(const KernelTable* table, TableFor(tier));
  GetTables().active.store(table, std::memory_order_release);
  return Status::Ok();
}

Status EnvironmentTierStatus() { return GetTables().env_status; }

}  // namespace fak::kernels
