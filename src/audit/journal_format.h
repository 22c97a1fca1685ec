// Constants of the journal and deletion-certificate formats (specified in docs/audit.md).
// Changing any of these changes every hash and signature: bump the version instead.
#ifndef FAK_SRC_AUDIT_JOURNAL_FORMAT_H_
#define FAK_SRC_AUDIT_JOURNAL_FORMAT_H_

#include <cstdint>
#include <string_view>

namespace fak::internal::audit_format {

// ---- journal rows: one canonical JSON object per '\n'-terminated line ----
inline constexpr char kRowTerminator = '\n';
inline constexpr uint64_t kFirstSeq = 1;
// The writer's exclusive lock lives beside the journal: `<path>.lock` (its content is unused).
inline constexpr std::string_view kLockSuffix = ".lock";
inline constexpr std::string_view kSeq = "seq";
inline constexpr std::string_view kTime = "time";  // integer microseconds since the Unix epoch
inline constexpr std::string_view kKind = "kind";
inline constexpr std::string_view kSubject = "subject";
inline constexpr std::string_view kPayload = "payload";
inline constexpr std::string_view kPrevHash = "prev_hash";
inline constexpr std::string_view kHash = "hash";

// ---- row kinds written by the certificate issuer ----
inline constexpr std::string_view kKindDeletion = "deletion";
inline constexpr std::string_view kKindDeletionRefused = "deletion.refused";

// ---- an "erasure" row (Planner::EraseText: a text sealed, its bytes and its tree KV removed) ----
inline constexpr std::string_view kKindErasure = "erasure";
inline constexpr std::string_view kPTreeTokens = "tree_tokens";  // KV tokens the issuer's tree evicted

// ---- payload of a "deletion" row ----
inline constexpr std::string_view kPSegment = "segment";  // object: the segment record below
inline constexpr std::string_view kPSegId = "id";
inline constexpr std::string_view kPSegKind = "kind";
inline constexpr std::string_view kPSegFrom = "from";
inline constexpr std::string_view kPSegTokens = "n_tokens";
inline constexpr std::string_view kPSegSource = "source_digest";
inline constexpr std::string_view kPSegTokenDigest = "tokens_digest";  // sha256 of the int32 LE ids
inline constexpr std::string_view kPTokensBefore = "cache_tokens_before";
inline constexpr std::string_view kPTokensAfter = "cache_tokens_after";
inline constexpr std::string_view kPDigestBefore = "cache_digest_before";
inline constexpr std::string_view kPDigestAfter = "cache_digest_after";
inline constexpr std::string_view kPNeverSaw = "never_saw_digest";
inline constexpr std::string_view kPMaxAbsDelta = "max_abs_delta";
inline constexpr std::string_view kPModel = "model_digest";
inline constexpr std::string_view kPReason = "reason";
inline constexpr std::string_view kPRerotated = "n_rerotated";
inline constexpr std::string_view kPRecomputed = "n_recomputed";
inline constexpr std::string_view kPRefusal = "refusal";  // "deletion.refused": what failed

// ---- deletion certificate ----
inline constexpr int kCertificateVersion = 1;
// Version 2 adds the signed "fleet" object (event, confirmed workers); otherwise identical.
inline constexpr int kCertificateFleetVersion = 2;
// Prefixed to the canonical JSON before signing, so a signature over a certificate can never be
// replayed as a signature over any other fak message.
inline constexpr std::string_view kCertificateSigningDomain = "fak.deletion-certificate.v1\n";
inline constexpr std::string_view kCertificateScope =
    "Proves that the span was removed from one inference working set (the KV cache of one session "
    "of the named model) and that this cache now equals one that never saw it. Does not prove "
    "removal from model weights, backups, replicas, logs, the text store or other caches.";
// The statement of an erasure certificate (CertifyErasure): bound to an "erasure" row; no one
// cache was cut, so nothing is witnessed and its cache, witness and model fields are empty.
inline constexpr std::string_view kErasureScope =
    "Proves that the issuer sealed the content for the tenant its journal row names (that tenant is "
    "never served KV made from it again), erased it from that tenant's text store and evicted from its "
    "tree the KV that tenant could reuse, as journaled, and that each fleet worker named confirmed "
    "removing its own such copies. Does not prove removal from model weights, backups, replicas, logs "
    "or caches outside the named workers.";

}  // namespace fak::internal::audit_format

#endif  // FAK_SRC_AUDIT_JOURNAL_FORMAT_H_
