// KVTransfer: the metadata contract for moving one KV span between storage tiers.
//
// A data contract with no engine behind it yet: the manifest travels with the bytes, so the
// receiving tier gates reuse exactly as the sender did. Canonical JSON: docs/manifest.md.
#ifndef FAK_GATE_KV_TRANSFER_H_
#define FAK_GATE_KV_TRANSFER_H_

#include <string>
#include <string_view>

#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/gate/kv_manifest.h"

namespace fak {

// Storage tiers, hottest first.
enum class KVTier : int { kResidentMemory = 0, kLocalDisk, kRemoteStore };
FAK_EXPORT std::string_view KVTierName(KVTier tier);  // "resident_memory" | "local_disk" | "remote_store"
enum class TransferDirection { kOffload, kOnload };
FAK_EXPORT std::string_view TransferDirectionName(TransferDirection direction);  // "offload" | "onload"

inline constexpr std::string_view kTransferSchema = "fak.kv_transfer";

// Moving one span between tiers: offload goes to a colder tier, onload to a hotter one. The
// manifest travels with the bytes so the receiving tier gates reuse exactly as the sender did.
struct FAK_EXPORT KVTransfer {
  TransferDirection direction = TransferDirection::kOffload;
  KVTier source = KVTier::kResidentMemory;
  KVTier target = KVTier::kLocalDisk;
  KVManifest manifest;

  // InvalidArgument when the direction disagrees with the tiers or the manifest is invalid.
  Status Validate() const;
  // Canonical JSON (docs/manifest.md); the manifest is embedded as an object.
  Result<std::string> ToJson() const;
  static Result<KVTransfer> FromJson(std::string_view json);

  friend bool operator==(const KVTransfer&, const KVTransfer&) = default;
};

}  // namespace fak

#endif  // FAK_GATE_KV_TRANSFER_H_
