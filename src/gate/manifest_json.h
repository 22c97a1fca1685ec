// Internal JSON plumbing for manifests and transfers: a size-capped parse and a strict object
// reader that names the field at fault (docs/manifest.md). Parsing, dumping and exception
// containment are src/core/json.h's; nlohmann_json stays behind the public API.
#ifndef FAK_SRC_CACHE_MANIFEST_JSON_H_
#define FAK_SRC_CACHE_MANIFEST_JSON_H_

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "fak/core/digest.h"
#include "fak/core/status.h"
#include "fak/gate/kv_manifest.h"
#include "src/core/json.h"

namespace fak::internal {

// Largest manifest or transfer document accepted, in bytes (a real one is under 2 KiB).
inline constexpr size_t kMaxManifestJsonBytes = 64 * 1024;

// Parses `text` as one JSON value of at most kMaxManifestJsonBytes; InvalidArgument
// "<what>: malformed JSON: ..." on any error.
Result<Json> ParseJsonText(std::string_view text, std::string_view what);

// Shortest decimal that round-trips (std::to_chars), e.g. "10000", "500000", "1e+06".
std::string FormatDouble(double value);
// The inverse: the whole string must be one finite number.
Result<double> ParseDouble(std::string_view text);

// The manifest as a JSON object; with_binding_digest = false gives the document the binding digest
// is computed over.
Json ManifestToJsonValue(const KVManifest& manifest, bool with_binding_digest);
// Reads, validates and digest-checks a manifest object; error messages start with `path`.
Result<KVManifest> ManifestFromJsonValue(const Json& value, const std::string& path);

// Reads the fields of one JSON object, recording the first error (later reads return defaults).
// Finish() also reports a field that was never read, so unknown fields are rejected.
class JsonObjectReader {
 public:
  JsonObjectReader(const Json& value, std::string path);

  std::string String(std::string_view key);
  Digest Hex(std::string_view key);  // 64 lowercase hex digits
  uint64_t Unsigned(std::string_view key);
  int64_t Signed(std::string_view key);
  // The member object, or nullptr (with the error recorded) when missing or not an object.
  const Json* Object(std::string_view key);
  // Marks `key` read without checking its type (the caller checks).
  const Json* Raw(std::string_view key);

  bool ok() const { return status_.ok(); }
  Status Finish() const;
  std::string FieldPath(std::string_view key) const { return path_ + "." + std::string(key); }

 private:
  // The member, or nullptr after recording "missing" or "expected <type>".
  const Json* Find(std::string_view key, bool (*type_ok)(const Json&), const char* type_name);
  void Fail(Status status);

  const Json& value_;
  std::string path_;
  Status status_;
  std::set<std::string, std::less<>> read_;
};

}  // namespace fak::internal

#endif  // FAK_SRC_CACHE_MANIFEST_JSON_H_
