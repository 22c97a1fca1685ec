// KVTransfer: the tier-move contract validates direction against tiers and round-trips canonically.
#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "fak/gate/kv_transfer.h"
#include "tests/gate/gate_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

KVTransfer Offload() {
  KVTransfer t;
  t.direction = TransferDirection::kOffload;
  t.source = KVTier::kResidentMemory;
  t.target = KVTier::kLocalDisk;
  t.manifest = testing::FixedManifest();
  return t;
}

TEST(ManifestKVTransfer, RoundTripIsCanonical) {
  for (KVTransfer t : {Offload(), KVTransfer{TransferDirection::kOnload, KVTier::kRemoteStore, KVTier::kResidentMemory,
                                            testing::FixedManifest()}}) {
    ASSERT_OK_AND_ASSIGN(std::string text, t.ToJson());
    ASSERT_OK_AND_ASSIGN(KVTransfer back, KVTransfer::FromJson(text));
    EXPECT_EQ(back, t);
    EXPECT_EQ(*back.ToJson(), text);
    EXPECT_EQ(nlohmann::json::parse(text).dump(), text);
    // The embedded manifest is the manifest's own canonical document.
    EXPECT_NE(text.find(*t.manifest.ToJson()), std::string::npos);
  }
  EXPECT_EQ(KVTierName(KVTier::kRemoteStore), "remote_store");
  EXPECT_EQ(TransferDirectionName(TransferDirection::kOnload), "onload");
}

TEST(ManifestKVTransfer, DirectionMustAgreeWithTiers) {
  KVTransfer t = Offload();
  EXPECT_OK(t.Validate());
  t.target = KVTier::kResidentMemory;
  EXPECT_NE(t.Validate().message().find("both"), std::string_view::npos);
  t = Offload();
  t.direction = TransferDirection::kOnload;  // resident -> disk is not an onload
  EXPECT_NE(t.Validate().message().find("onload must move to a hotter tier"), std::string_view::npos);
  t = Offload();
  std::swap(t.source, t.target);
  EXPECT_NE(t.Validate().message().find("offload must move to a colder tier"), std::string_view::npos);
  EXPECT_FALSE(t.ToJson().has_value());
  t = Offload();
  t.manifest.tenant.clear();
  EXPECT_NE(t.Validate().message().find("transfer.manifest.tenant"), std::string_view::npos);
}

TEST(ManifestKVTransfer, ParseErrorsNameTheField) {
  const std::string text = *Offload().ToJson();
  auto edited = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = nlohmann::json::parse(text);
    edit(j);
    return KVTransfer::FromJson(j.dump());
  };
  Result<KVTransfer> r = edited([](nlohmann::json& j) { j["direction"] = "sideways"; });
  EXPECT_NE(r.error().message().find("transfer.direction"), std::string_view::npos) << r.error().ToString();
  r = edited([](nlohmann::json& j) { j["target_tier"] = "tape"; });
  EXPECT_NE(r.error().message().find("transfer.target_tier"), std::string_view::npos) << r.error().ToString();
  r = edited([](nlohmann::json& j) { j["manifest"]["tenant"] = "globex"; });
  EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
  EXPECT_NE(r.error().message().find("transfer.manifest.binding_digest"), std::string_view::npos);
  r = edited([](nlohmann::json& j) { j["manifest"].erase("plane"); });
  EXPECT_NE(r.error().message().find("transfer.manifest.plane: missing"), std::string_view::npos);
  r = edited([](nlohmann::json& j) { j["schema_version"] = 9; });
  EXPECT_EQ(r.error().code(), StatusCode::kUnsupported);
  r = edited([](nlohmann::json& j) { j["direction"] = "onload"; });  // parses, then fails Validate
  EXPECT_NE(r.error().message().find("onload must move"), std::string_view::npos) << r.error().ToString();
}

}  // namespace
}  // namespace fak
