// A throwaway PKI made at test time with OpenSSL's C API: a root CA and a time-stamping
// authority certificate it issued (critical extendedKeyUsage timeStamping), plus an unrelated CA.
// Nothing is read from disk or the network, so RFC 3161 anchors are verified for real, offline.
#ifndef FAK_TESTS_AUDIT_TEST_PKI_H_
#define FAK_TESTS_AUDIT_TEST_PKI_H_

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <string>
#include <utility>
#include <vector>

namespace fak::testing {

struct TestPki {
  std::string ca_cert_pem;        // the root the verifier trusts
  std::string tsa_cert_pem, tsa_key_pem;
  std::string other_ca_cert_pem;  // a root that did not issue the TSA
  std::string plain_cert_pem, plain_key_pem;  // issued by the CA, without timeStamping usage
};

namespace pki_internal {

inline EVP_PKEY* NewEcKey() { return EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"); }

inline std::string Pem(X509* cert) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

inline std::string Pem(EVP_PKEY* key) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

// A certificate for `key` named `cn`, signed by `issuer`/`issuer_key` (self-signed when null).
inline X509* MakeCert(const char* cn, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key, long serial,
                      const std::vector<std::pair<int, const char*>>& extensions) {
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), serial);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn), -1, -1, 0);
  X509_set_issuer_name(x, issuer != nullptr ? X509_get_subject_name(issuer) : name);
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer != nullptr ? issuer : x, x, nullptr, nullptr, 0);
  for (const auto& [nid, value] : extensions) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  }
  X509_sign(x, issuer_key != nullptr ? issuer_key : key, EVP_sha256());
  return x;
}

}  // namespace pki_internal

inline TestPki MakeTestPki() {
  using namespace pki_internal;
  const std::vector<std::pair<int, const char*>> ca_ext = {{NID_basic_constraints, "critical,CA:TRUE"},
                                                           {NID_key_usage, "critical,keyCertSign,cRLSign"},
                                                           {NID_subject_key_identifier, "hash"}};
  EVP_PKEY *ca_key = NewEcKey(), *tsa_key = NewEcKey(), *other_key = NewEcKey(), *plain_key = NewEcKey();
  X509* ca = MakeCert("fak test root CA", ca_key, nullptr, nullptr, 1, ca_ext);
  X509* other = MakeCert("unrelated root CA", other_key, nullptr, nullptr, 1, ca_ext);
  X509* tsa = MakeCert("fak test TSA", tsa_key, ca, ca_key, 2,
                       {{NID_basic_constraints, "critical,CA:FALSE"},
                        {NID_key_usage, "critical,digitalSignature,nonRepudiation"},
                        {NID_ext_key_usage, "critical,timeStamping"},
                        {NID_subject_key_identifier, "hash"},
                        {NID_authority_key_identifier, "keyid:always"}});
  X509* plain = MakeCert("not a TSA", plain_key, ca, ca_key, 3,
                         {{NID_basic_constraints, "critical,CA:FALSE"}, {NID_key_usage, "critical,digitalSignature"}});
  TestPki out{Pem(ca), Pem(tsa), Pem(tsa_key), Pem(other), Pem(plain), Pem(plain_key)};
  for (X509* c : {ca, other, tsa, plain}) X509_free(c);
  for (EVP_PKEY* k : {ca_key, tsa_key, other_key, plain_key}) EVP_PKEY_free(k);
  return out;
}

// One PKI per test binary run (key generation is cheap, but there is no need to repeat it).
inline const TestPki& SharedTestPki() {
  static const TestPki* pki = new TestPki(MakeTestPki());
  return *pki;
}

inline constexpr const char* kTestTsaPolicy = "1.3.6.1.4.1.55555.1.1";

}  // namespace fak::testing

#endif  // FAK_TESTS_AUDIT_TEST_PKI_H_
