// KVManifest: validation, the binding digest and canonical JSON (format in docs/manifest.md).
#include <string>
#include <utility>

#include "fak/gate/kv_manifest.h"
#include "fak/core/env.h"
#include "src/gate/manifest_json.h"

namespace fak {
namespace {

using json = internal::Json;

json BindingToJson(const BindingTuple& b) {
  json j = json::object();
  j["model_id"] = b.model_id.Hex();
  j["tokenizer_id"] = b.tokenizer_id.Hex();
  j["adapter_id"] = b.adapter_id.Hex();
  j["precision"] = {{"weight_dtype", b.precision.weight_dtype},
                    {"kv_dtype", b.precision.kv_dtype},
                    {"kernel_tier", b.precision.kernel_tier}};
  j["position_convention"] = {{"scheme", b.position.scheme},
                              {"pairing", b.position.pairing},
                              {"base", internal::FormatDouble(b.position.base)},
                              {"scaling", b.position.scaling}};
  j["producer"] = {{"library", b.producer.library},
                   {"version", b.producer.version},
                   {"kernel_build", b.producer.kernel_build}};
  j["span_digest"] = b.span_digest.Hex();
  j["tokens"] = {{"from", b.tokens.from}, {"count", b.tokens.count}};
  j["integrity_checksum"] = b.integrity_checksum.Hex();
  return j;
}

Status ReadPrecision(internal::JsonObjectReader& parent, Precision* p) {
  const json* obj = parent.Object("precision");
  if (obj == nullptr) return parent.Finish();
  internal::JsonObjectReader r(*obj, parent.FieldPath("precision"));
  p->weight_dtype = r.String("weight_dtype");
  p->kv_dtype = r.String("kv_dtype");
  p->kernel_tier = r.String("kernel_tier");
  return r.Finish();
}

Status ReadPosition(internal::JsonObjectReader& parent, PositionConvention* p) {
  const json* obj = parent.Object("position_convention");
  if (obj == nullptr) return parent.Finish();
  internal::JsonObjectReader r(*obj, parent.FieldPath("position_convention"));
  p->scheme = r.String("scheme");
  p->pairing = r.String("pairing");
  const std::string base = r.String("base");
  p->scaling = r.String("scaling");
  FAK_RETURN_IF_ERROR(r.Finish());
  Result<double> value = internal::ParseDouble(base);
  if (!value) return InvalidArgument(r.FieldPath("base") + ": " + std::string(value.error().message()));
  p->base = *value;
  return Status::Ok();
}

Status ReadProducer(internal::JsonObjectReader& parent, Producer* p) {
  const json* obj = parent.Object("producer");
  if (obj == nullptr) return parent.Finish();
  internal::JsonObjectReader r(*obj, parent.FieldPath("producer"));
  p->library = r.String("library");
  p->version = r.String("version");
  p->kernel_build = r.String("kernel_build");
  return r.Finish();
}

Status ReadTokens(internal::JsonObjectReader& parent, TokenRange* t) {
  const json* obj = parent.Object("tokens");
  if (obj == nullptr) return parent.Finish();
  internal::JsonObjectReader r(*obj, parent.FieldPath("tokens"));
  t->from = r.Unsigned("from");
  t->count = r.Unsigned("count");
  return r.Finish();
}

Status ReadBinding(const json& value, const std::string& path, BindingTuple* b) {
  internal::JsonObjectReader r(value, path);
  b->model_id = r.Hex("model_id");
  b->tokenizer_id = r.Hex("tokenizer_id");
  b->adapter_id = r.Hex("adapter_id");
  FAK_RETURN_IF_ERROR(ReadPrecision(r, &b->precision));
  FAK_RETURN_IF_ERROR(ReadPosition(r, &b->position));
  FAK_RETURN_IF_ERROR(ReadProducer(r, &b->producer));
  b->span_digest = r.Hex("span_digest");
  FAK_RETURN_IF_ERROR(ReadTokens(r, &b->tokens));
  b->integrity_checksum = r.Hex("integrity_checksum");
  return r.Finish();
}

Result<Sharing> ParseSharing(const std::string& name, const std::string& field) {
  if (name == SharingName(Sharing::kTenantOnly)) return Sharing::kTenantOnly;
  if (name == SharingName(Sharing::kPublicPrefix)) return Sharing::kPublicPrefix;
  return InvalidArgument(field + ": expected \"tenant_only\" or \"public_prefix\", got \"" + name.substr(0, 64) + "\"");
}

// Checks "schema" and "schema_version" first, so a future document fails as Unsupported rather
// than on whichever new field it has.
Status CheckSchema(const json& value, const std::string& path, std::string_view schema) {
  if (!value.is_object()) {
    return InvalidArgument(path + ": expected object, got " + std::string(internal::JsonTypeName(value)));
  }
  auto s = value.find("schema");
  if (s == value.end()) return InvalidArgument(path + ".schema: missing");
  if (!s->is_string()) return InvalidArgument(path + ".schema: expected string, got " + std::string(internal::JsonTypeName(*s)));
  if (s->get_ref<const std::string&>() != schema) {
    return Unsupported(path + ".schema: expected \"" + std::string(schema) + "\", got \"" +
                       s->get_ref<const std::string&>().substr(0, 64) + "\"");
  }
  auto v = value.find("schema_version");
  if (v == value.end()) return InvalidArgument(path + ".schema_version: missing");
  if (!v->is_number_integer()) {
    return InvalidArgument(path + ".schema_version: expected integer, got " + std::string(internal::JsonTypeName(*v)));
  }
  if (!v->is_number_unsigned() || v->get<uint64_t>() != static_cast<uint64_t>(kManifestSchemaVersion)) {
    return Unsupported(path + ".schema_version: this build reads version " + std::to_string(kManifestSchemaVersion) +
                       ", got " + internal::DumpJson(*v));
  }
  return Status::Ok();
}

}  // namespace

std::string_view SharingName(Sharing sharing) {
  return sharing == Sharing::kPublicPrefix ? "public_prefix" : "tenant_only";
}

bool IsValidTenant(std::string_view tenant) {
  if (tenant.empty() || tenant.size() > 128) return false;
  for (char c : tenant) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                    c == ':' || c == '@' || c == '/' || c == '+' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Status KVManifest::Validate() const {
  FAK_RETURN_IF_ERROR(binding.Validate());
  if (binding.integrity_checksum.IsZero()) {
    return InvalidArgument("binding.integrity_checksum: must be set in a manifest (the KV bytes' digest)");
  }
  if (!IsValidTenant(tenant)) {
    return InvalidArgument("tenant: must be 1..128 characters of [A-Za-z0-9._:@/+-], got \"" + tenant.substr(0, 64) + "\"");
  }
  if (plane != kKVArtifactPlane) {
    return InvalidArgument("plane: must be \"" + std::string(kKVArtifactPlane) + "\", got \"" + plane.substr(0, 64) + "\"");
  }
  if (provenance != kProvenanceStamp) {
    return InvalidArgument("provenance: must be \"" + std::string(kProvenanceStamp) + "\", got \"" +
                           provenance.substr(0, 64) + "\"");
  }
  if (created_unix_ms < 0) return InvalidArgument("created_unix_ms: must be >= 0, got " + std::to_string(created_unix_ms));
  return Status::Ok();
}

Digest KVManifest::BindingDigest() const {
  return Digest::Of(internal::DumpJson(internal::ManifestToJsonValue(*this, /*with_binding_digest=*/false)));
}

Result<std::string> KVManifest::ToJson() const {
  FAK_RETURN_IF_ERROR(Validate());
  return internal::DumpJson(internal::ManifestToJsonValue(*this, /*with_binding_digest=*/true));
}

Result<KVManifest> KVManifest::FromJson(std::string_view text) {
  FAK_ASSIGN_OR_RETURN(json value, internal::ParseJsonText(text, "manifest"));
  return internal::ManifestFromJsonValue(value, "manifest");
}

Result<KVManifest> MakeManifest(BindingTuple binding, const Digest& source_digest, std::string tenant, Sharing sharing) {
  KVManifest m;
  m.binding = std::move(binding);
  m.source_digest = source_digest;
  m.tenant = std::move(tenant);
  m.sharing = sharing;
  m.created_unix_ms = Env::Default()->NowUnixMicros() / 1000;
  FAK_RETURN_IF_ERROR(m.Validate());
  return m;
}

namespace internal {

json ManifestToJsonValue(const KVManifest& m, bool with_binding_digest) {
  json j = json::object();
  j["schema"] = std::string(kManifestSchema);
  j["schema_version"] = kManifestSchemaVersion;
  j["binding"] = BindingToJson(m.binding);
  j["source_digest"] = m.source_digest.Hex();
  j["tenant"] = m.tenant;
  j["sharing"] = std::string(SharingName(m.sharing));
  j["plane"] = m.plane;
  j["provenance"] = m.provenance;
  j["created_unix_ms"] = m.created_unix_ms;
  if (with_binding_digest) j["binding_digest"] = m.BindingDigest().Hex();
  return j;
}

namespace {

// The fields, before ManifestFromJsonValue checks validity and the binding digest.
Result<KVManifest> ReadManifest(const json& value, const std::string& path, Digest* claimed) {
  FAK_RETURN_IF_ERROR(CheckSchema(value, path, kManifestSchema));
  JsonObjectReader r(value, path);
  r.String("schema");
  r.Unsigned("schema_version");
  KVManifest m;
  if (const json* b = r.Object("binding")) FAK_RETURN_IF_ERROR(ReadBinding(*b, r.FieldPath("binding"), &m.binding));
  m.source_digest = r.Hex("source_digest");
  m.tenant = r.String("tenant");
  const std::string sharing = r.String("sharing");
  m.plane = r.String("plane");
  m.provenance = r.String("provenance");
  m.created_unix_ms = r.Signed("created_unix_ms");
  *claimed = r.Hex("binding_digest");
  FAK_RETURN_IF_ERROR(r.Finish());
  FAK_ASSIGN_OR_RETURN(m.sharing, ParseSharing(sharing, r.FieldPath("sharing")));
  return m;
}

}  // namespace

Result<KVManifest> ManifestFromJsonValue(const json& value, const std::string& path) {
  // Defensive: the reader checks types before get(), so nothing should throw.
  return ContainJsonExceptions(StatusCode::kInvalidArgument, path, [&]() -> Result<KVManifest> {
    Digest claimed;
    FAK_ASSIGN_OR_RETURN(KVManifest m, ReadManifest(value, path, &claimed));
    if (Status s = m.Validate(); !s.ok()) return InvalidArgument(path + "." + std::string(s.message()));
    if (const Digest actual = m.BindingDigest(); actual != claimed) {
      return Corruption(path + ".binding_digest: the fields hash to " + actual.Hex() + ", the document says " +
                        claimed.Hex());
    }
    return m;
  });
}

}  // namespace internal
}  // namespace fak
