// RFC 3161 time anchors: a TSA timestamp over a certificate's digest, requested through a host
// supplied TimestampAuthority (fak has no network code) and verified with OpenSSL's TS API.
#ifndef FAK_AUDIT_TIME_ANCHOR_H_
#define FAK_AUDIT_TIME_ANCHOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fak/audit/deletion_certificate.h"
#include "fak/core/digest.h"
#include "fak/core/export.h"
#include "fak/core/status.h"

namespace fak {

// A time-stamp authority: takes a DER TimeStampReq and returns a DER TimeStampResp. Hosts wrap
// their HTTP client here (POST application/timestamp-query); fak has no network code.
class FAK_EXPORT TimestampAuthority {
 public:
  virtual ~TimestampAuthority() = default;
  virtual Result<std::string> Respond(std::string_view request_der) = 0;
};

// An in-process TSA (OpenSSL TS_RESP_CTX) signing with `cert_pem` (which must carry the critical
// timeStamping extended key usage) and `key_pem`, under `policy_oid` (dotted). Thread-safe.
// `chain_pem` (optional) adds intermediate certificates to each token.
FAK_EXPORT Result<std::unique_ptr<TimestampAuthority>> MakeLocalTimestampAuthority(std::string_view cert_pem,
                                                                        std::string_view key_pem,
                                                                        std::string_view policy_oid,
                                                                        std::string_view chain_pem = {});

struct TimeAnchor {
  int64_t gen_time_unix_s = 0;
  std::string policy_oid;
  std::string serial_hex;
};

// A DER TimeStampReq whose sha256 imprint is `digest`, with a random nonce, asking for the TSA cert.
FAK_EXPORT Result<std::string> MakeTimestampRequest(const Digest& digest);
// Requests a timestamp over CertificateDigest(*cert), checks the response (granted, same imprint,
// same nonce) and stores the token in cert->time_anchor.
FAK_EXPORT Status AnchorCertificate(DeletionCertificate* cert, TimestampAuthority& tsa);
// Verifies a DER TimeStampToken: signature chains to `tsa_roots_pem`, signer has timeStamping
// usage, and the imprint (sha256) is `digest`. VerificationFailed naming what failed.
FAK_EXPORT Result<TimeAnchor> VerifyTimeAnchor(std::string_view token_der, const Digest& digest, std::string_view tsa_roots_pem);

}  // namespace fak

#endif  // FAK_AUDIT_TIME_ANCHOR_H_
