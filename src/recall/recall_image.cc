// Recall image JSON: encode, and decode with every field checked (nlohmann exceptions contained).
#include "src/recall/recall_image.h"

#include <nlohmann/json.hpp>

#include <set>

#include "src/store/store_format.h"

namespace fak::internal {
namespace {

using nlohmann::json;

constexpr std::string_view kFormatName = "fak.recall_image";

json VerdictJson(const Verdict& v) {
  return json{{"action", v.quarantined() ? "quarantine" : "admit"}, {"detector", v.detector}, {"reason", v.reason}};
}

// The checksum covers the canonical dump (sorted keys, no whitespace) of everything but itself.
// Invalid UTF-8 (say, in an admitter's reason) is replaced rather than thrown on.
std::string Dump(const json& j, int indent) { return j.dump(indent, ' ', false, json::error_handler_t::replace); }
std::string Checksum(const json& body) { return Digest::Of(Dump(body, -1)).Hex(); }

Result<Digest> HexField(const json& obj, const char* key, const std::string& where) {
  if (!obj.contains(key) || !obj[key].is_string()) return Corruption(where + ": field '" + key + "' is missing or not a string");
  // FromHex accepts exactly 64 hex digits, so no path-like value ("../x") can become a blob name.
  Result<Digest> d = Digest::FromHex(obj[key].get<std::string>());
  if (!d.has_value()) return Corruption(where + ": field '" + key + "': " + std::string(d.error().message()));
  return d;
}

Result<std::string> StringField(const json& obj, const char* key, const std::string& where) {
  if (!obj.contains(key) || !obj[key].is_string()) return Corruption(where + ": field '" + key + "' is missing or not a string");
  return obj[key].get<std::string>();
}

Result<Verdict> ParseVerdict(const json& v, const std::string& where) {
  if (!v.is_object()) return Corruption(where + ": field 'verdict' is not an object");
  FAK_ASSIGN_OR_RETURN(std::string action, StringField(v, "action", where + ".verdict"));
  FAK_ASSIGN_OR_RETURN(std::string detector, StringField(v, "detector", where + ".verdict"));
  FAK_ASSIGN_OR_RETURN(std::string reason, StringField(v, "reason", where + ".verdict"));
  if (action == "admit") return Verdict::Admit();
  if (action == "quarantine") return Verdict::Quarantine(std::move(detector), std::move(reason));
  return Corruption(where + ".verdict: action '" + action + "' is neither 'admit' nor 'quarantine'");
}

Result<ImageSegment> ParseSegment(const json& s, const std::string& where) {
  if (!s.is_object()) return Corruption(where + " is not an object");
  ImageSegment seg;
  FAK_ASSIGN_OR_RETURN(seg.id, StringField(s, "id", where));
  FAK_ASSIGN_OR_RETURN(std::string kind, StringField(s, "kind", where));
  Result<SegmentKind> k = ParseSegmentKind(kind);
  if (!k.has_value()) return Corruption(where + ": " + std::string(k.error().message()));
  seg.kind = *k;
  FAK_ASSIGN_OR_RETURN(seg.source, HexField(s, "source", where));
  if (!s.contains("size_bytes") || !s["size_bytes"].is_number_unsigned()) {
    return Corruption(where + ": field 'size_bytes' is missing or not an unsigned integer");
  }
  seg.size_bytes = s["size_bytes"].get<uint64_t>();
  if (!s.contains("verdict")) return Corruption(where + ": field 'verdict' is missing");
  FAK_ASSIGN_OR_RETURN(seg.verdict, ParseVerdict(s["verdict"], where));
  return seg;
}

Result<ImageRecord> ParseBody(const json& doc, const std::string& path) {
  ImageRecord image;
  image.version = doc["version"].get<uint32_t>();
  FAK_ASSIGN_OR_RETURN(image.name, StringField(doc, "name", path));
  if (!doc.contains("chain") || !doc["chain"].is_object()) return Corruption(path + ": field 'chain' is missing or not an object");
  FAK_ASSIGN_OR_RETURN(image.chain_id, HexField(doc["chain"], "id", path + ": chain"));
  FAK_ASSIGN_OR_RETURN(image.chain, StringField(doc["chain"], "describe", path + ": chain"));
  if (!doc.contains("segments") || !doc["segments"].is_array()) return Corruption(path + ": field 'segments' is missing or not an array");
  std::set<std::string> ids;
  for (size_t i = 0; i < doc["segments"].size(); ++i) {
    FAK_ASSIGN_OR_RETURN(ImageSegment seg, ParseSegment(doc["segments"][i], path + ": segments[" + std::to_string(i) + "]"));
    if (seg.id.empty() || !ids.insert(seg.id).second) {
      return Corruption(path + ": segments[" + std::to_string(i) + "]: id '" + seg.id + "' is empty or repeated");
    }
    image.segments.push_back(std::move(seg));
  }
  return image;
}

}  // namespace

Result<SegmentKind> ParseSegmentKind(std::string_view name) {
  for (SegmentKind k : {SegmentKind::kSystem, SegmentKind::kUser, SegmentKind::kToolResult, SegmentKind::kAssistant}) {
    if (SegmentKindName(k) == name) return k;
  }
  return InvalidArgument("unknown segment kind '" + std::string(name) + "'");
}

std::string EncodeImage(const ImageRecord& image) {
  json segments = json::array();
  for (const ImageSegment& s : image.segments) {
    segments.push_back(json{{"id", s.id}, {"kind", std::string(SegmentKindName(s.kind))}, {"source", s.source.Hex()},
                            {"size_bytes", s.size_bytes}, {"verdict", VerdictJson(s.verdict)}});
  }
  json doc{{"format", kFormatName}, {"version", image.version}, {"name", image.name},
           {"chain", json{{"id", image.chain_id.Hex()}, {"describe", image.chain}}}, {"segments", std::move(segments)}};
  doc["checksum"] = Checksum(doc);
  return Dump(doc, 1) + "\n";
}

Result<ImageRecord> DecodeImage(std::string_view bytes, const std::string& path) {
  json doc = json::parse(bytes.begin(), bytes.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Corruption(path + ": not a JSON object (damaged or truncated)");
  if (!doc.contains("format") || !doc["format"].is_string() || doc["format"].get<std::string>() != kFormatName) return Corruption(path + ": field 'format' is not '" + std::string(kFormatName) + "'");
  if (!doc.contains("version") || !doc["version"].is_number_unsigned()) return Corruption(path + ": field 'version' is missing");
  if (doc["version"].get<uint64_t>() != kRecallImageVersion) {
    return Unsupported(path + ": recall image version " + doc["version"].dump() + " is not supported (this build reads " +
                       std::to_string(kRecallImageVersion) + ")");
  }
  if (!doc.contains("checksum") || !doc["checksum"].is_string()) return Corruption(path + ": field 'checksum' is missing");
  const std::string checksum = doc["checksum"].get<std::string>();
  doc.erase("checksum");
  if (Checksum(doc) != checksum) return Corruption(path + ": checksum does not match the image (edited or damaged)");
  try {
    return ParseBody(doc, path);
  } catch (const std::exception& e) {  // a type mismatch the checks above missed
    return Corruption(path + ": " + e.what());
  }
}

}  // namespace fak::internal
