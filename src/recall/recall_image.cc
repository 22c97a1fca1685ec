// Recall image JSON: encode, and decode with every field checked (src/core/json.h contains exceptions).
#include "src/recall/recall_image.h"

#include <set>

#include "src/core/json.h"
#include "src/store/store_format.h"

namespace fak::internal {
namespace {

using json = Json;

constexpr std::string_view kFormatName = "fak.recall_image";

json VerdictJson(const Verdict& v) {
  return json{{"action", v.quarantined() ? "quarantine" : "admit"}, {"detector", v.detector}, {"reason", v.reason}};
}

// The checksum covers the canonical dump (sorted keys, no whitespace) of everything but itself.
// Invalid UTF-8 (say, in an admitter's reason) is replaced rather than thrown on.
std::string Dump(const json& j, int indent) { return DumpJson(j, indent); }
std::string Checksum(const json& body) { return Digest::Of(Dump(body, -1)).Hex(); }

// Digests are read with GetDigest: exactly 64 hex digits, so no path-like value ("../x") can become
// a blob name.

Result<Verdict> ParseVerdict(const json& v, const std::string& where) {
  if (!v.is_object()) return Corruption(where + ": field 'verdict' is not an object");
  FAK_ASSIGN_OR_RETURN(std::string action, GetString(v, "action", where + ".verdict"));
  FAK_ASSIGN_OR_RETURN(std::string detector, GetString(v, "detector", where + ".verdict"));
  FAK_ASSIGN_OR_RETURN(std::string reason, GetString(v, "reason", where + ".verdict"));
  if (action == "admit") return Verdict::Admit();
  if (action == "quarantine") return Verdict::Quarantine(std::move(detector), std::move(reason));
  return Corruption(where + ".verdict: action '" + action + "' is neither 'admit' nor 'quarantine'");
}

Result<ImageSegment> ParseSegment(const json& s, const std::string& where) {
  if (!s.is_object()) return Corruption(where + " is not an object");
  ImageSegment seg;
  FAK_ASSIGN_OR_RETURN(seg.id, GetString(s, "id", where));
  FAK_ASSIGN_OR_RETURN(std::string kind, GetString(s, "kind", where));
  Result<SegmentKind> k = ParseSegmentKind(kind);
  if (!k.has_value()) return Corruption(where + ": " + std::string(k.error().message()));
  seg.kind = *k;
  FAK_ASSIGN_OR_RETURN(seg.source, GetDigest(s, "source", where));
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
  FAK_ASSIGN_OR_RETURN(image.name, GetString(doc, "name", path));
  if (!doc.contains("chain") || !doc["chain"].is_object()) return Corruption(path + ": field 'chain' is missing or not an object");
  FAK_ASSIGN_OR_RETURN(image.chain_id, GetDigest(doc["chain"], "id", path + ": chain"));
  FAK_ASSIGN_OR_RETURN(image.chain, GetString(doc["chain"], "describe", path + ": chain"));
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
  FAK_ASSIGN_OR_RETURN(json doc, ParseJsonObject(bytes, path, StatusCode::kCorruption));
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
  // A type mismatch the checks above missed comes back as Corruption.
  return ContainJsonExceptions(StatusCode::kCorruption, path, [&] { return ParseBody(doc, path); });
}

}  // namespace fak::internal
