// RFC 3161 time anchors against a local TSA whose CA is generated in the test: the honest token
// verifies; a foreign root, another digest, a non-TSA certificate and garbage are refused.
#include <gtest/gtest.h>

#include <ctime>

#include "fak/audit/audit.h"
#include "tests/audit/test_pki.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::kTestTsaPolicy;
using testing::SharedTestPki;

// Sends a request for `digest` and returns the DER response.
std::string ResponseFor(TimestampAuthority& tsa, const Digest& digest) {
  auto req = MakeTimestampRequest(digest);
  EXPECT_TRUE(req.has_value());
  auto resp = tsa.Respond(*req);
  EXPECT_TRUE(resp.has_value());
  return *resp;
}

std::unique_ptr<TimestampAuthority> Tsa() {
  const auto& pki = SharedTestPki();
  auto tsa = MakeLocalTimestampAuthority(pki.tsa_cert_pem, pki.tsa_key_pem, kTestTsaPolicy);
  EXPECT_TRUE(tsa.has_value()) << tsa.error().ToString();
  return std::move(*tsa);
}

DeletionCertificate SignedCert() {
  DeletionCertificate c;
  c.scope = std::string("x");  // not `= "x"`: GCC 12 -Wrestrict misfires on that assign
  c.subject = Digest::Of("deleted text");
  c.issued_at_unix_us = 1;
  auto key = SigningKey::Generate();
  EXPECT_OK(SignCertificate(&c, *key));
  return c;
}

TEST(TimeAnchor, AnchorVerifiesAgainstTheTestCa) {
  auto tsa = Tsa();
  DeletionCertificate c = SignedCert();
  ASSERT_OK(AnchorCertificate(&c, *tsa));
  ASSERT_FALSE(c.time_anchor.empty());
  ASSERT_OK_AND_ASSIGN(Digest digest, CertificateDigest(c));
  ASSERT_OK_AND_ASSIGN(TimeAnchor a, VerifyTimeAnchor(c.time_anchor, digest, SharedTestPki().ca_cert_pem));
  EXPECT_EQ(a.policy_oid, kTestTsaPolicy);
  EXPECT_FALSE(a.serial_hex.empty());
  EXPECT_LE(std::abs(a.gen_time_unix_s - static_cast<int64_t>(std::time(nullptr))), 120);
  // A second anchor gets the next serial.
  DeletionCertificate c2 = SignedCert();
  ASSERT_OK(AnchorCertificate(&c2, *tsa));
  ASSERT_OK_AND_ASSIGN(TimeAnchor a2, VerifyTimeAnchor(c2.time_anchor, *CertificateDigest(c2), SharedTestPki().ca_cert_pem));
  EXPECT_NE(a2.serial_hex, a.serial_hex);
}

TEST(TimeAnchor, ForeignRootWrongDigestAndGarbageAreRefused) {
  auto tsa = Tsa();
  DeletionCertificate c = SignedCert();
  ASSERT_OK(AnchorCertificate(&c, *tsa));
  const Digest digest = *CertificateDigest(c);
  auto foreign = VerifyTimeAnchor(c.time_anchor, digest, SharedTestPki().other_ca_cert_pem);
  ASSERT_FALSE(foreign.has_value());
  EXPECT_EQ(foreign.error().code(), StatusCode::kVerificationFailed);
  EXPECT_NE(foreign.error().message().find("signature does not verify"), std::string_view::npos) << foreign.error().ToString();

  auto other_digest = VerifyTimeAnchor(c.time_anchor, Digest::Of("something else"), SharedTestPki().ca_cert_pem);
  ASSERT_FALSE(other_digest.has_value());
  EXPECT_NE(other_digest.error().message().find("different digest"), std::string_view::npos);

  EXPECT_FALSE(VerifyTimeAnchor("not DER", digest, SharedTestPki().ca_cert_pem).has_value());
  EXPECT_FALSE(VerifyTimeAnchor(c.time_anchor, digest, "no pem here").has_value());
  std::string flipped = c.time_anchor;
  flipped[flipped.size() - 5] ^= 0x40;  // inside the signature
  EXPECT_FALSE(VerifyTimeAnchor(flipped, digest, SharedTestPki().ca_cert_pem).has_value());
}

TEST(TimeAnchor, RawRequestResponseRoundTrip) {
  auto tsa = Tsa();
  const Digest digest = Digest::Of("a journal head");
  const std::string resp = ResponseFor(*tsa, digest);
  EXPECT_GT(resp.size(), 100u);  // a DER TimeStampResp (status + token)
}

TEST(TimeAnchor, LocalTsaRefusesACertificateWithoutTimeStampingUsage) {
  const auto& pki = SharedTestPki();
  auto tsa = MakeLocalTimestampAuthority(pki.plain_cert_pem, pki.plain_key_pem, kTestTsaPolicy);
  ASSERT_FALSE(tsa.has_value());
  EXPECT_EQ(tsa.error().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(MakeLocalTimestampAuthority(pki.tsa_cert_pem, pki.plain_key_pem, kTestTsaPolicy).has_value());
  EXPECT_FALSE(MakeLocalTimestampAuthority(pki.tsa_cert_pem, pki.tsa_key_pem, "not an oid").has_value());
}

// A TSA that answers with someone else's token: the anchor must be refused at anchoring time.
class ReplayingTsa : public TimestampAuthority {
 public:
  explicit ReplayingTsa(std::string resp) : resp_(std::move(resp)) {}
  Result<std::string> Respond(std::string_view) override { return resp_; }

 private:
  std::string resp_;
};

TEST(TimeAnchor, AnchoringRejectsAReplayedResponse) {
  auto tsa = Tsa();
  const std::string old_resp = ResponseFor(*tsa, Digest::Of("an older certificate"));
  ReplayingTsa replay(old_resp);
  DeletionCertificate c = SignedCert();
  Status s = AnchorCertificate(&c, replay);
  EXPECT_EQ(s.code(), StatusCode::kVerificationFailed) << s.ToString();
  EXPECT_TRUE(c.time_anchor.empty());
  ReplayingTsa garbage("junk");
  EXPECT_FALSE(AnchorCertificate(&c, garbage).ok());
}

}  // namespace
}  // namespace fak
