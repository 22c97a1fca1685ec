// KVTransfer: the metadata contract for moving a span between storage tiers, and its JSON.
#include <string>

#include "fak/gate/kv_transfer.h"
#include "src/gate/manifest_json.h"

namespace fak {
namespace {

using json = internal::Json;

Result<KVTier> ParseTier(const std::string& name, const std::string& field) {
  for (KVTier t : {KVTier::kResidentMemory, KVTier::kLocalDisk, KVTier::kRemoteStore}) {
    if (name == KVTierName(t)) return t;
  }
  return InvalidArgument(field + ": expected \"resident_memory\", \"local_disk\" or \"remote_store\", got \"" +
                         name.substr(0, 64) + "\"");
}

Result<TransferDirection> ParseDirection(const std::string& name, const std::string& field) {
  if (name == TransferDirectionName(TransferDirection::kOffload)) return TransferDirection::kOffload;
  if (name == TransferDirectionName(TransferDirection::kOnload)) return TransferDirection::kOnload;
  return InvalidArgument(field + ": expected \"offload\" or \"onload\", got \"" + name.substr(0, 64) + "\"");
}

Status CheckTransferSchema(internal::JsonObjectReader& r) {
  const std::string schema = r.String("schema");
  if (!r.ok()) return r.Finish();
  if (schema != kTransferSchema) {
    return Unsupported(r.FieldPath("schema") + ": expected \"" + std::string(kTransferSchema) + "\", got \"" +
                       schema.substr(0, 64) + "\"");
  }
  const uint64_t version = r.Unsigned("schema_version");
  if (!r.ok()) return r.Finish();
  if (version != static_cast<uint64_t>(kManifestSchemaVersion)) {
    return Unsupported(r.FieldPath("schema_version") + ": this build reads version " +
                       std::to_string(kManifestSchemaVersion) + ", got " + std::to_string(version));
  }
  return Status::Ok();
}

}  // namespace

std::string_view KVTierName(KVTier tier) {
  switch (tier) {
    case KVTier::kResidentMemory: return "resident_memory";
    case KVTier::kLocalDisk: return "local_disk";
    case KVTier::kRemoteStore: return "remote_store";
  }
  return "unknown";
}

std::string_view TransferDirectionName(TransferDirection direction) {
  return direction == TransferDirection::kOnload ? "onload" : "offload";
}

Status KVTransfer::Validate() const {
  const int from = static_cast<int>(source), to = static_cast<int>(target);
  if (from == to) return InvalidArgument("transfer: source_tier and target_tier are both " + std::string(KVTierName(source)));
  if (direction == TransferDirection::kOffload && to < from) {
    return InvalidArgument("transfer: offload must move to a colder tier, not " + std::string(KVTierName(source)) +
                           " -> " + std::string(KVTierName(target)));
  }
  if (direction == TransferDirection::kOnload && to > from) {
    return InvalidArgument("transfer: onload must move to a hotter tier, not " + std::string(KVTierName(source)) +
                           " -> " + std::string(KVTierName(target)));
  }
  if (Status s = manifest.Validate(); !s.ok()) return InvalidArgument("transfer.manifest." + std::string(s.message()));
  return Status::Ok();
}

Result<std::string> KVTransfer::ToJson() const {
  FAK_RETURN_IF_ERROR(Validate());
  json j = json::object();
  j["schema"] = std::string(kTransferSchema);
  j["schema_version"] = kManifestSchemaVersion;
  j["direction"] = std::string(TransferDirectionName(direction));
  j["source_tier"] = std::string(KVTierName(source));
  j["target_tier"] = std::string(KVTierName(target));
  j["manifest"] = internal::ManifestToJsonValue(manifest, /*with_binding_digest=*/true);
  return internal::DumpJson(j);
}

Result<KVTransfer> KVTransfer::FromJson(std::string_view text) {
  FAK_ASSIGN_OR_RETURN(json value, internal::ParseJsonText(text, "transfer"));
  // Defensive: the reader checks types before get(), so nothing should throw.
  return internal::ContainJsonExceptions(StatusCode::kInvalidArgument, "transfer", [&]() -> Result<KVTransfer> {
    internal::JsonObjectReader r(value, "transfer");
    FAK_RETURN_IF_ERROR(CheckTransferSchema(r));
    KVTransfer t;
    const std::string direction = r.String("direction");
    const std::string source = r.String("source_tier");
    const std::string target = r.String("target_tier");
    const json* manifest = r.Object("manifest");
    FAK_RETURN_IF_ERROR(r.Finish());
    FAK_ASSIGN_OR_RETURN(t.direction, ParseDirection(direction, r.FieldPath("direction")));
    FAK_ASSIGN_OR_RETURN(t.source, ParseTier(source, r.FieldPath("source_tier")));
    FAK_ASSIGN_OR_RETURN(t.target, ParseTier(target, r.FieldPath("target_tier")));
    FAK_ASSIGN_OR_RETURN(t.manifest, internal::ManifestFromJsonValue(*manifest, r.FieldPath("manifest")));
    FAK_RETURN_IF_ERROR(t.Validate());
    return t;
  });
}

}  // namespace fak
