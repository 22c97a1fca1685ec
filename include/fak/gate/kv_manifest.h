// KVManifest: the record that travels with one resident KV span and the gate reads on every reuse.
//
// It holds the span's BindingTuple, the digest of the source text it was prefilled from, its tenant
// and sharing, its plane and a provenance stamp (a KV hit is performance material, never proof).
// Manifests serialize to canonical JSON with a schema version (docs/manifest.md, architecture §6).
#ifndef FAK_GATE_KV_MANIFEST_H_
#define FAK_GATE_KV_MANIFEST_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "fak/core/digest.h"
#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/gate/binding_tuple.h"

namespace fak {

inline constexpr int kManifestSchemaVersion = 1;
inline constexpr std::string_view kManifestSchema = "fak.kv_manifest";
inline constexpr std::string_view kKVArtifactPlane = "kv_artifact";
inline constexpr std::string_view kProvenanceStamp = "performance_material_not_proof";

// Who may reuse a span. kPublicPrefix lets other tenants reuse it, but only the part of it that
// lies inside a prefix the AccessPolicy declares public (a common system prompt).
enum class Sharing { kTenantOnly, kPublicPrefix };
FAK_EXPORT std::string_view SharingName(Sharing sharing);  // "tenant_only" | "public_prefix"

// Tenant names: 1..128 characters of [A-Za-z0-9._:@/+-].
FAK_EXPORT bool IsValidTenant(std::string_view tenant);

// One resident KV span. Plain value; copy freely.
struct FAK_EXPORT KVManifest {
  BindingTuple binding;
  Digest source_digest;  // sha256 of the source text the span was prefilled from
  std::string tenant;
  Sharing sharing = Sharing::kTenantOnly;
  std::string plane = std::string(kKVArtifactPlane);
  std::string provenance = std::string(kProvenanceStamp);
  int64_t created_unix_ms = 0;

  // InvalidArgument naming the first bad field (the binding's checksum must be set here).
  Status Validate() const;
  // sha256 of the canonical JSON of every field except binding_digest itself (docs/manifest.md).
  Digest BindingDigest() const;
  // Canonical JSON: sorted keys, no whitespace, schema and schema_version, binding_digest. Fails
  // (InvalidArgument) on a manifest that FromJson would reject, so emitted JSON always parses.
  Result<std::string> ToJson() const;
  // Parses JSON of schema_version 1 (canonical or not). InvalidArgument for malformed JSON or a
  // missing, unknown, mistyped or invalid field (the message names it); Unsupported for another
  // schema or version; Corruption when binding_digest does not match the fields. Never throws.
  static Result<KVManifest> FromJson(std::string_view json);

  friend bool operator==(const KVManifest&, const KVManifest&) = default;
};

// A manifest stamped now (created_unix_ms from the system clock), validated.
FAK_EXPORT Result<KVManifest> MakeManifest(BindingTuple binding, const Digest& source_digest, std::string tenant,
                                Sharing sharing = Sharing::kTenantOnly);
}  // namespace fak

#endif  // FAK_GATE_KV_MANIFEST_H_
