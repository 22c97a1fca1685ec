// KVManifest JSON: canonical, byte-stable round trips; clear errors naming the field at fault.
#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "fak/gate/kv_manifest.h"
#include "tests/gate/gate_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using nlohmann::json;
using testing::FixedManifest;

// The format is pinned: a change here is a schema change (bump kManifestSchemaVersion, update
// docs/manifest.md), never a silent one.
constexpr std::string_view kGoldenJson =
    R"({"binding":{"adapter_id":"0000000000000000000000000000000000000000000000000000000000000000","integri)"
    R"(ty_checksum":"2a13d662e1fbbb165cb43f207bc2754586941992200e8499370019fc00bfec27","model_id":"9372c470)"
    R"(eeadd5ecd9c3c74c2b3cb633f8e2f2fad799250a0f70d652b6b825e4","position_convention":{"base":"10000","pai)"
    R"(ring":"split_half","scaling":"none","scheme":"rope"},"precision":{"kernel_tier":"avx2","kv_dtype":"f)"
    R"(32","weight_dtype":"f32"},"producer":{"kernel_build":"kernels-r1 gcc-12.2.0","library":"fak","versio)"
    R"(n":"0.1.0"},"span_digest":"a5824280e3216b290696213510ca0bdacf3b350ca0c15b5fd78742c43b8638d2","tokeni)"
    R"(zer_id":"5f97e3774c51edd1d63706c2ec3826c564a067794770cdab0f8c4797971cacf9","tokens":{"count":4,"from)"
    R"(":4}},"binding_digest":"8432ef55f08b6572918150f9149022d395b924b6e1ff9c4a4cad55fe6223d477","created_u)"
    R"(nix_ms":1700000000000,"plane":"kv_artifact","provenance":"performance_material_not_proof","schema":")"
    R"(fak.kv_manifest","schema_version":1,"sharing":"tenant_only","source_digest":"a28130a037ced440a70f1e1)"
    R"(e896d9f6cf7147adc31e233e588f58dde12902a2d","tenant":"acme"})";

std::string Json(const KVManifest& m) {
  Result<std::string> j = m.ToJson();
  EXPECT_TRUE(j.has_value()) << j.error().ToString();
  return j.has_value() ? *j : std::string();
}

// Re-dumps `text` after `edit` without fixing binding_digest.
std::string Edited(const std::string& text, const std::function<void(json&)>& edit) {
  json j = json::parse(text);
  edit(j);
  return j.dump();
}

// Re-dumps after `edit` with a recomputed binding_digest, so only the edit is wrong.
std::string EditedResealed(const std::string& text, const std::function<void(json&)>& edit) {
  json j = json::parse(text);
  edit(j);
  j.erase("binding_digest");
  j["binding_digest"] = Digest::Of(j.dump()).Hex();
  return j.dump();
}

TEST(ManifestJson, GoldenFormat) {
  const std::string text = Json(FixedManifest());
  EXPECT_EQ(text, kGoldenJson);
  ASSERT_OK_AND_ASSIGN(KVManifest back, KVManifest::FromJson(kGoldenJson));
  EXPECT_EQ(back, FixedManifest());
}

TEST(ManifestJson, RoundTripIsByteStableAndCanonical) {
  testing::GateWorld w = testing::GateWorld::Make();
  for (const KVManifest& m : {FixedManifest(), w.Manifest(0, 12), w.Manifest(3, 4, "t/x@y.z:+_-", Sharing::kPublicPrefix)}) {
    const std::string text = Json(m);
    ASSERT_OK_AND_ASSIGN(KVManifest back, KVManifest::FromJson(text));
    EXPECT_EQ(back, m);
    EXPECT_EQ(Json(back), text);
    EXPECT_EQ(json::parse(text).dump(), text);  // sorted keys, no whitespace
    EXPECT_EQ(text.find('\n'), std::string::npos);
    EXPECT_EQ(back.BindingDigest(), m.BindingDigest());
  }
}

TEST(ManifestJson, NonCanonicalInputParsesAndReserializesCanonically) {
  const std::string text = Json(FixedManifest());
  const std::string pretty = json::parse(text).dump(2);
  ASSERT_OK_AND_ASSIGN(KVManifest back, KVManifest::FromJson(pretty));
  EXPECT_EQ(Json(back), text);
  // A base written another way is the same number; the digest is over the canonical form.
  const std::string other_base = Edited(text, [](json& j) { j["binding"]["position_convention"]["base"] = "1e4"; });
  ASSERT_OK_AND_ASSIGN(KVManifest same, KVManifest::FromJson(other_base));
  EXPECT_EQ(Json(same), text);
}

TEST(ManifestJson, BindingDigestCoversEveryField) {
  const std::string text = Json(FixedManifest());
  const std::vector<std::function<void(json&)>> edits = {
      [](json& j) { j["tenant"] = "globex"; },
      [](json& j) { j["sharing"] = "public_prefix"; },
      [](json& j) { j["created_unix_ms"] = 1; },
      [](json& j) { j["source_digest"] = Digest::Of("x").Hex(); },
      [](json& j) { j["binding"]["tokens"]["from"] = 3; },
      [](json& j) { j["binding"]["precision"]["kernel_tier"] = "scalar"; },
      [](json& j) { j["binding"]["position_convention"]["base"] = "10001"; },
      [](json& j) { j["binding"]["integrity_checksum"] = Digest::Of("y").Hex(); },
  };
  for (const auto& edit : edits) {
    Result<KVManifest> r = KVManifest::FromJson(Edited(text, edit));
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), StatusCode::kCorruption) << r.error().ToString();
    EXPECT_NE(r.error().message().find("binding_digest"), std::string_view::npos);
    EXPECT_OK(KVManifest::FromJson(EditedResealed(text, edit)));  // resealed, the same edit parses
  }
}

TEST(ManifestJson, RejectsOtherSchemasAndVersions) {
  const std::string text = Json(FixedManifest());
  for (const json& version : {json(2), json(0), json(1000000)}) {
    Result<KVManifest> r = KVManifest::FromJson(EditedResealed(text, [&](json& j) { j["schema_version"] = version; }));
    EXPECT_EQ(r.error().code(), StatusCode::kUnsupported) << r.error().ToString();
    EXPECT_NE(r.error().message().find("schema_version"), std::string_view::npos);
  }
  Result<KVManifest> r = KVManifest::FromJson(EditedResealed(text, [](json& j) { j["schema_version"] = "1"; }));
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  r = KVManifest::FromJson(EditedResealed(text, [](json& j) { j["schema"] = "fak.kv_transfer"; }));
  EXPECT_EQ(r.error().code(), StatusCode::kUnsupported);
  // A future version is Unsupported even when it also adds fields.
  r = KVManifest::FromJson(EditedResealed(text, [](json& j) { j["schema_version"] = 2; j["new_field"] = 1; }));
  EXPECT_EQ(r.error().code(), StatusCode::kUnsupported);
}

TEST(ManifestJson, MissingUnknownAndMistypedFieldsAreNamed) {
  const std::string text = Json(FixedManifest());
  struct Case {
    std::function<void(json&)> edit;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j.erase("tenant"); }, "manifest.tenant: missing"},
      {[](json& j) { j["binding"].erase("span_digest"); }, "manifest.binding.span_digest: missing"},
      {[](json& j) { j["binding"]["tokens"].erase("count"); }, "manifest.binding.tokens.count: missing"},
      {[](json& j) { j["binding"]["precision"].erase("kv_dtype"); }, "manifest.binding.precision.kv_dtype: missing"},
      {[](json& j) { j["extra"] = 1; }, "manifest.extra: unknown field"},
      {[](json& j) { j["binding"]["producer"]["x"] = "y"; }, "manifest.binding.producer.x: unknown field"},
      {[](json& j) { j["tenant"] = 5; }, "manifest.tenant: expected string, got unsigned integer"},
      {[](json& j) { j["binding"]["tokens"]["from"] = -1; }, "manifest.binding.tokens.from: expected unsigned integer"},
      {[](json& j) { j["binding"]["tokens"]["from"] = 1.5; }, "manifest.binding.tokens.from: expected unsigned integer"},
      {[](json& j) { j["binding"]["tokens"] = json::array(); }, "manifest.binding.tokens: expected object, got array"},
      {[](json& j) { j["binding"]["model_id"] = Digest::Of("m").Hex().substr(1); }, "manifest.binding.model_id: expected 64"},
      {[](json& j) { j["binding"]["model_id"] = "A" + Digest::Of("m").Hex().substr(1); }, "manifest.binding.model_id"},
      {[](json& j) { j["binding"]["position_convention"]["base"] = "ten"; }, "base: \"ten\" is not a decimal"},
      {[](json& j) { j["binding"]["position_convention"]["base"] = "inf"; }, "base: \"inf\" is not finite"},
      {[](json& j) { j["sharing"] = "everyone"; }, "manifest.sharing: expected \"tenant_only\""},
      {[](json& j) { j["plane"] = "text"; }, "manifest.plane: must be \"kv_artifact\""},
      {[](json& j) { j["tenant"] = "a b"; }, "manifest.tenant: must be"},
      {[](json& j) { j["created_unix_ms"] = -5; }, "manifest.created_unix_ms: must be >= 0"},
      {[](json& j) { j["created_unix_ms"] = 18446744073709551615ull; }, "manifest.created_unix_ms: 18446744073709551615 is out of range"},
      {[](json& j) { j["binding"]["tokens"]["count"] = 0; }, "manifest.binding.tokens.count: must be > 0"},
      {[](json& j) { j["binding"]["integrity_checksum"] = std::string(64, '0'); }, "manifest.binding.integrity_checksum: must be set"},
  };
  for (const Case& c : cases) {
    Result<KVManifest> r = KVManifest::FromJson(EditedResealed(text, c.edit));
    ASSERT_FALSE(r.has_value()) << c.field;
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument) << r.error().ToString();
    EXPECT_NE(r.error().message().find(c.field), std::string_view::npos) << r.error().ToString();
  }
}

TEST(ManifestJson, MalformedDocumentsFailClearly) {
  for (std::string_view bad : {"", "{", "[]", "null", "\"manifest\"", "{\"schema\":\"fak.kv_manifest\"}", "{}{}",
                               "{\"schema\":\"fak.kv_manifest\",\"schema_version\":1}"}) {
    Result<KVManifest> r = KVManifest::FromJson(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().message().rfind("manifest", 0), 0u) << r.error().ToString();
  }
  const std::string huge(100 * 1024, ' ');
  EXPECT_NE(KVManifest::FromJson(huge).error().message().find("limit"), std::string_view::npos);
}

TEST(ManifestJson, ToJsonRefusesInvalidManifests) {
  KVManifest m = FixedManifest();
  m.tenant = "bad tenant";
  EXPECT_EQ(m.ToJson().status().code(), StatusCode::kInvalidArgument);
  m = FixedManifest();
  m.binding.integrity_checksum = Digest();
  EXPECT_EQ(m.ToJson().status().code(), StatusCode::kInvalidArgument);
  m = FixedManifest();
  m.provenance = "proof";
  EXPECT_NE(m.ToJson().status().message().find("provenance"), std::string_view::npos);
}

TEST(ManifestJson, MakeManifestStampsTimeAndValidates) {
  KVManifest fixed = FixedManifest();
  ASSERT_OK_AND_ASSIGN(KVManifest m, MakeManifest(fixed.binding, fixed.source_digest, "acme"));
  EXPECT_GT(m.created_unix_ms, 1700000000000);
  EXPECT_EQ(m.plane, kKVArtifactPlane);
  EXPECT_EQ(m.provenance, kProvenanceStamp);
  EXPECT_EQ(MakeManifest(fixed.binding, fixed.source_digest, "").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fak
