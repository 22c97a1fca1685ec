// Dispatch: builds the tables of this architecture's tiers once, picks one, and lets callers switch with a Status.
#include "kernels/dispatch.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "kernels/cpu_features.h"

namespace fak::kernels {
namespace {

struct Tables {
  KernelTable by_tier[kNumTiers];
  Status env_status;
  std::atomic<const KernelTable*> active{nullptr};

  Tables() {
    FillScalarTable(&by_tier[static_cast<int>(Tier::kScalar)]);
#if defined(__x86_64__) || defined(__i386__)
    FillAvx2Table(&by_tier[static_cast<int>(Tier::kAvx2)]);
    FillAvx512Table(&by_tier[static_cast<int>(Tier::kAvx512)]);
#elif defined(__aarch64__)
    FillNeonTable(&by_tier[static_cast<int>(Tier::kNeon)]);
#endif
    Tier best = BestTierOn(DetectCpuFeatures());
    Tier chosen = best;
    if (const char* env = std::getenv("FAK_KERNEL_TIER"); env != nullptr && *env != '\0') {
      Result<Tier> parsed = ParseTier(env);
      if (!parsed.has_value()) {
        env_status = parsed.error().WithContext("FAK_KERNEL_TIER");
      } else if (!TierSupported(*parsed)) {
        env_status = Unsupported(std::string("FAK_KERNEL_TIER=") + env + " but this CPU/OS supports only " +
                                 std::string(TierName(best)) + " and below");
      } else {
        chosen = *parsed;
      }
    }
    active.store(&by_tier[static_cast<int>(chosen)]);
  }
};

Tables& GetTables() {
  static Tables tables;
  return tables;
}

}  // namespace

const KernelTable& Active() { return *GetTables().active.load(std::memory_order_acquire); }
Tier ActiveTier() { return Active().tier; }

bool TierSupported(Tier tier) { return TierSupportedOn(tier, DetectCpuFeatures()); }

std::vector<Tier> SupportedTiers() {
  std::vector<Tier> tiers;
  for (Tier t : {Tier::kScalar, Tier::kAvx2, Tier::kAvx512, Tier::kNeon})
    if (TierSupported(t)) tiers.push_back(t);
  return tiers;
}

std::string_view TierName(Tier tier) {
  switch (tier) {
    case Tier::kScalar: return "scalar";
    case Tier::kAvx2: return "avx2";
    case Tier::kAvx512: return "avx512";
    case Tier::kNeon: return "neon";
  }
  return "unknown";
}

Result<Tier> ParseTier(std::string_view name) {
  for (Tier t : {Tier::kScalar, Tier::kAvx2, Tier::kAvx512, Tier::kNeon})
    if (name == TierName(t)) return t;
  return InvalidArgument("unknown kernel tier '" + std::string(name) + "' (expected scalar, avx2, avx512 or neon)");
}

Result<const KernelTable*> TableFor(Tier tier) {
  if (!TierSupported(tier)) return Unsupported("kernel tier " + std::string(TierName(tier)) + " is not supported by this CPU/OS");
  return &GetTables().by_tier[static_cast<int>(tier)];
}

Status SetTier(Tier tier) {
  FAK_ASSIGN_OR_RETURN(const KernelTable* table, TableFor(tier));
  GetTables().active.store(table, std::memory_order_release);
  return Status::Ok();
}

Status EnvironmentTierStatus() { return GetTables().env_status; }

}  // namespace fak::kernels
