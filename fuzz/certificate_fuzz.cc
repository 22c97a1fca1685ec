// Fuzzes the deletion certificate's JSON (DeletionCertificate::FromJson). A certificate that parses
// must re-encode and parse back, and goes through the whole verifier (signature, witness fields,
// its time anchor against a fixed TSA root when fak has TSA support) with an empty journal.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fak/audit/deletion_certificate.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string roots = fak::fuzz::ReadFile(FAK_FUZZ_DATA_DIR "/tsa_root.pem");
  auto cert = fak::DeletionCertificate::FromJson(fak::fuzz::AsText(data, size));
  if (!cert.has_value()) return 0;
  auto json = cert->ToJson();
  FAK_FUZZ_CHECK(json.has_value(), json.error().ToString());
  auto again = fak::DeletionCertificate::FromJson(*json);
  FAK_FUZZ_CHECK(again.has_value(), again.error().ToString());
  (void)fak::CertificateSigningBytes(*cert);
  (void)fak::CertificateDigest(*cert);
  const std::vector<fak::PublicKey> trusted = {cert->issuer_public_key};
  fak::CertificateVerifyOptions options;
  options.tsa_roots_pem = roots;
  const fak::CertificateCheck check = fak::VerifyDeletionCertificate(*cert, {}, trusted, options);
  (void)check.ToStatus();
  return 0;
}
