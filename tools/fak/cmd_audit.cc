// `fak verify` (deletion certificates), `fak manifest show` (KV manifests) and `fak store fsck`
// (directory blob stores): the checks an auditor or operator runs from a shell.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "fak/audit/audit.h"
#include "fak/store/blob_store.h"
#include "fak/gate/kv_manifest.h"
#include "tools/fak/cli.h"

namespace fak::cli {
namespace {

constexpr std::string_view kVerifyUsage =
    "usage: fak verify CERT --journal J --key K [--key K2 ...] [--tsa-roots PEM] [--require-anchor]\n"
    "\n"
    "Checks a deletion certificate (CERT: its JSON file, '-' for stdin) the way\n"
    "VerifyDeletionCertificate does, failing closed: the ed25519 signature by a trusted key, the\n"
    "never-saw witness and max|dlogit| == 0, the journal's hash chain from its first row, the\n"
    "journal row it names, its subject, and the evicted count re-counted from the journal.\n"
    "Prints OK, or the fault and its reason on stderr with exit status 1.\n"
    "\n"
    "options:\n"
    "  --journal J            the journal file the certificate's row is in (required)\n"
    "  --key K                a trusted issuer key: 64 hex characters, or a file holding the hex, an\n"
    "                         ed25519 public key PEM or the issuer's private key PEM (required;\n"
    "                         repeat to trust several)\n"
    "  --tsa-roots PEM        CA certificates trusted for RFC 3161 time anchors. Default: anchors\n"
    "                         are not checked\n"
    "  --require-anchor       fail when the certificate carries no time anchor\n";

constexpr std::string_view kManifestUsage =
    "usage: fak manifest show FILE [--canonical]\n"
    "\n"
    "Parses a KV manifest (FILE: its JSON, '-' for stdin) with every check KVManifest::FromJson\n"
    "makes — schema and version, every field, and binding_digest against the fields — and prints\n"
    "its canonical JSON, indented for reading (or exactly canonical with --canonical).\n";

constexpr std::string_view kStoreUsage =
    "usage: fak store fsck DIR [--salvage]\n"
    "\n"
    "Opens the directory blob store at DIR as the library does (rebuilding the index from the blob\n"
    "files and journal; leftover temporary files of unacknowledged writes are removed) and reads\n"
    "back every blob, verifying its bytes against its sha256. Exit status 1 when any blob fails,\n"
    "a blob file was rejected or a journal record was skipped. A store another process has open\n"
    "is refused (exit status 1, nothing touched): stop its writer first.\n"
    "\n"
    "options:\n"
    "  --salvage              skip journal records that fail their checksum (counted and reported)\n"
    "                         instead of refusing to open\n";

bool IsHex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string_view::npos ? std::string() : std::string(s.substr(b, e - b + 1));
}

Result<std::string> Base64Decode(std::string_view text) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else if (c == '=' || c == '\n' || c == '\r' || c == ' ') continue;
    else return InvalidArgument("not base64");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    if ((bits += 6) >= 8) out.push_back(static_cast<char>((acc >> (bits -= 8)) & 0xff));
  }
  return out;
}

// An ed25519 SubjectPublicKeyInfo is this fixed 12-byte DER prefix followed by the 32 key bytes.
Result<PublicKey> PublicKeyFromPem(std::string_view pem) {
  constexpr std::string_view kBegin = "-----BEGIN PUBLIC KEY-----", kEnd = "-----END PUBLIC KEY-----";
  const size_t b = pem.find(kBegin), e = pem.find(kEnd);
  if (b == std::string_view::npos || e == std::string_view::npos || e < b) return InvalidArgument("malformed PUBLIC KEY PEM");
  FAK_ASSIGN_OR_RETURN(std::string der, Base64Decode(pem.substr(b + kBegin.size(), e - b - kBegin.size())));
  constexpr unsigned char kPrefix[] = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00};
  if (der.size() != sizeof(kPrefix) + 32 || der.compare(0, sizeof(kPrefix), reinterpret_cast<const char*>(kPrefix), sizeof(kPrefix)) != 0)
    return InvalidArgument("the PEM public key is not an ed25519 key");
  PublicKey key;
  std::copy(der.end() - 32, der.end(), key.bytes.begin());
  return key;
}

// --key: hex, or a file with hex, a public key PEM or a private key PEM.
Result<PublicKey> ParseKey(const std::string& arg) {
  if (IsHex64(arg)) return PublicKey::FromHex(arg);
  Result<std::string> text = ReadFileOrStdin(arg);
  if (!text) return InvalidArgument("--key '" + arg + "' is neither 64 hex characters nor a readable file");
  if (text->find("PUBLIC KEY-----") != std::string::npos) return PublicKeyFromPem(*text);
  if (text->find("PRIVATE KEY-----") != std::string::npos) {
    FAK_ASSIGN_OR_RETURN(SigningKey key, SigningKey::FromPem(*text));
    return key.public_key();
  }
  const std::string hex = Trim(*text);
  if (IsHex64(hex)) return PublicKey::FromHex(hex);
  return InvalidArgument("key file '" + arg + "' holds neither a hex key nor a PEM key");
}

// Exit status 1 and the reason on stderr.
int VerifyFailed(const std::string& reason) {
  std::fprintf(stderr, "fak verify: FAILED: %s\n", reason.c_str());
  return kExitFailure;
}

}  // namespace

int VerifyCommand(std::span<char* const> argv) {
  Result<Args> args = Args::Parse(argv, {{"journal", "key", "tsa-roots"}, {"require-anchor"}});
  if (!args) return UsageError("verify", args.error().message(), kVerifyUsage);
  if (args->help()) return ShowHelp(kVerifyUsage);
  if (args->positional().size() != 1) return UsageError("verify", "expected one CERT", kVerifyUsage);
  std::optional<std::string> journal_path = args->Get("journal");
  if (!journal_path) return UsageError("verify", "--journal is required", kVerifyUsage);
  if (!args->Has("key")) return UsageError("verify", "--key is required", kVerifyUsage);
  std::vector<PublicKey> trusted;
  for (const std::string& k : args->GetAll("key")) {
    Result<PublicKey> key = ParseKey(k);
    if (!key) return UsageError("verify", key.error().message(), kVerifyUsage);
    trusted.push_back(*key);
  }
  CertificateVerifyOptions options;
  options.require_time_anchor = args->Has("require-anchor");
  if (std::optional<std::string> roots = args->Get("tsa-roots")) {
    Result<std::string> pem = ReadFileOrStdin(*roots);
    if (!pem) return Fail("verify", pem.error());
    options.tsa_roots_pem = *pem;
  }
  Result<std::string> json = ReadFileOrStdin(args->positional()[0]);
  if (!json) return Fail("verify", json.error());
  Result<DeletionCertificate> cert = DeletionCertificate::FromJson(*json);
  if (!cert) return VerifyFailed("malformed: the certificate does not parse: " + cert.error().ToString());
  Result<std::vector<JournalRow>> rows = ReadJournalRows(*journal_path);
  if (!rows) return VerifyFailed("journal_broken: " + rows.error().ToString());

  CertificateCheck check = VerifyDeletionCertificate(*cert, *rows, trusted, options);
  if (!check.ok()) return VerifyFailed(std::string(CertificateFaultName(check.fault)) + ": " + check.detail);
  std::printf("OK: deletion certificate verified\n");
  std::printf("  subject          %s (segment '%s')\n", cert->subject.Hex().c_str(), cert->segment_id.c_str());
  std::printf("  evicted          %llu tokens at [%llu, +%llu), max|dlogit| = %g against a never-saw run\n",
              static_cast<unsigned long long>(cert->evicted_count), static_cast<unsigned long long>(cert->span_from),
              static_cast<unsigned long long>(cert->span_len), cert->max_abs_delta);
  std::printf("  journal row      #%llu of %zu, chain verified\n", static_cast<unsigned long long>(cert->journal_seq), rows->size());
  std::printf("  issuer           %s\n", cert->issuer_public_key.Hex().c_str());
  if (check.anchored_at_unix_s) std::printf("  time anchor      verified, genTime %lld (unix s)\n", static_cast<long long>(*check.anchored_at_unix_s));
  std::printf("  scope            %s\n", cert->scope.c_str());
  return kExitOk;
}

namespace {

// Indents compact JSON two spaces per level; strings (and escapes inside them) are copied as is.
std::string PrettyJson(std::string_view json) {
  std::string out;
  int depth = 0;
  bool in_string = false, escaped = false;
  auto newline = [&] { out += '\n' + std::string(2 * depth, ' '); };
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      out += c;
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if ((c == '{' || c == '[') && i + 1 < json.size() && (json[i + 1] == '}' || json[i + 1] == ']')) {
      out += c;
      out += json[++i];
      continue;
    }
    if (c == '}' || c == ']') {
      --depth;
      newline();
    }
    out += c;
    if (c == '{' || c == '[') {
      ++depth;
      newline();
    }
    if (c == ',') newline();
    if (c == ':') out += ' ';
  }
  return out;
}

}  // namespace

int ManifestCommand(std::span<char* const> argv) {
  Result<Args> args = Args::Parse(argv, {{}, {"canonical"}});
  if (!args) return UsageError("manifest", args.error().message(), kManifestUsage);
  if (args->help()) return ShowHelp(kManifestUsage);
  const auto& pos = args->positional();
  if (pos.size() != 2 || pos[0] != "show") return UsageError("manifest", "expected `show FILE`", kManifestUsage);
  Result<std::string> text = ReadFileOrStdin(pos[1]);
  if (!text) return Fail("manifest", text.error());
  Result<KVManifest> manifest = KVManifest::FromJson(*text);
  if (!manifest) return Fail("manifest", manifest.error().WithContext(pos[1]));
  Result<std::string> canonical = manifest->ToJson();
  if (!canonical) return Fail("manifest", canonical.error());
  std::printf("%s\n", args->Has("canonical") ? canonical->c_str() : PrettyJson(*canonical).c_str());
  return kExitOk;
}

namespace {

int Fsck(const std::string& dir, bool salvage) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return Fail("store", NotFound("'" + dir + "' is not a directory"));
  BlobStoreOptions options;
  options.capacity_bytes = UINT64_MAX;  // checking must never evict
  options.salvage_journal = salvage;
  Result<std::unique_ptr<BlobStore>> store = OpenDirectoryBlobStore(dir, options);
  if (!store) return Fail("store", store.error());
  Result<std::vector<Digest>> digests = (*store)->List();
  if (!digests) return Fail("store", digests.error());
  size_t n_bad = 0;
  uint64_t n_bytes = 0;
  for (size_t i = 0; i < digests->size(); ++i) {
    Result<std::string> bytes = (*store)->Get((*digests)[i]);
    if (bytes) {
      n_bytes += bytes->size();
    } else {
      ++n_bad;
      std::fprintf(stderr, "BAD %s: %s\n", (*digests)[i].Hex().c_str(), bytes.error().ToString().c_str());
    }
    Progress("fsck", i + 1, digests->size());
  }
  const BlobStoreStats st = (*store)->Stats();
  std::printf("%s: %zu blobs (%llu inline), %llu bytes verified; %zu failed\n", dir.c_str(), digests->size(),
              static_cast<unsigned long long>(st.n_inline), static_cast<unsigned long long>(n_bytes), n_bad);
  std::printf("on open: %llu blob files rejected, %llu journal records skipped, %llu torn journal bytes dropped\n",
              static_cast<unsigned long long>(st.n_corrupt_files), static_cast<unsigned long long>(st.n_corrupt_records),
              static_cast<unsigned long long>(st.torn_tail_bytes));
  const bool ok = n_bad == 0 && st.n_corrupt_files == 0 && st.n_corrupt_records == 0;
  if (ok)
    std::printf("OK\n");
  else
    std::fprintf(stderr, "fak store fsck: FAILED: %s\n", dir.c_str());
  return ok ? kExitOk : kExitFailure;
}

}  // namespace

int StoreCommand(std::span<char* const> argv) {
  Result<Args> args = Args::Parse(argv, {{}, {"salvage"}});
  if (!args) return UsageError("store", args.error().message(), kStoreUsage);
  if (args->help()) return ShowHelp(kStoreUsage);
  const auto& pos = args->positional();
  if (pos.size() != 2 || pos[0] != "fsck") return UsageError("store", "expected `fsck DIR`", kStoreUsage);
  return Fsck(pos[1], args->Has("salvage"));
}

}  // namespace fak::cli
