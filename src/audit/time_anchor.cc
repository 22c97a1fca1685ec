// RFC 3161 time anchors through OpenSSL's TS API: requests, an in-process TSA, and verification.
#include <openssl/bn.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ts.h>
#include <openssl/x509.h>

#include <atomic>
#include <cstring>
#include <ctime>
#include <mutex>

#include "src/audit/audit_internal.h"

namespace fak {

using internal::AnchorFailure;
using internal::AnchorResult;
using internal::OpenSslErrors;

namespace {

template <class T, void (*F)(T*)>
struct Deleter { void operator()(T* p) const { F(p); } };
template <class T, void (*F)(T*)>
using Owned = std::unique_ptr<T, Deleter<T, F>>;
using BioPtr = Owned<BIO, BIO_free_all>;
using X509Ptr = Owned<X509, X509_free>;
using PkeyPtr = Owned<EVP_PKEY, EVP_PKEY_free>;
using TsReqPtr = Owned<TS_REQ, TS_REQ_free>;
using TsRespPtr = Owned<TS_RESP, TS_RESP_free>;
using TsVerifyPtr = Owned<TS_VERIFY_CTX, TS_VERIFY_CTX_free>;
using TstInfoPtr = Owned<TS_TST_INFO, TS_TST_INFO_free>;
using Pkcs7Ptr = Owned<PKCS7, PKCS7_free>;
using MsgImprintPtr = Owned<TS_MSG_IMPRINT, TS_MSG_IMPRINT_free>;
using AlgorPtr = Owned<X509_ALGOR, X509_ALGOR_free>;
using Asn1IntPtr = Owned<ASN1_INTEGER, ASN1_INTEGER_free>;
using BnPtr = Owned<BIGNUM, BN_free>;

BioPtr MemBio(std::string_view bytes) { return BioPtr(BIO_new_mem_buf(bytes.data(), static_cast<int>(bytes.size()))); }

// DER of any i2d-able object.
template <class T>
Result<std::string> ToDer(const T* obj, int (*i2d)(const T*, unsigned char**), std::string_view what) {
  unsigned char* buf = nullptr;
  const int n = i2d(obj, &buf);
  if (n <= 0) return InvalidArgument(std::string(what) + ": cannot DER-encode (" + OpenSslErrors() + ")");
  std::string out(reinterpret_cast<char*>(buf), static_cast<size_t>(n));
  OPENSSL_free(buf);
  return out;
}

Result<TsReqPtr> BuildRequest(const Digest& digest) {
  TsReqPtr req(TS_REQ_new());
  MsgImprintPtr imprint(TS_MSG_IMPRINT_new());
  AlgorPtr algo(X509_ALGOR_new());
  unsigned char nonce_bytes[8];
  BnPtr nonce_bn(BN_new());
  if (!req || !imprint || !algo || !nonce_bn || RAND_bytes(nonce_bytes, sizeof(nonce_bytes)) != 1) {
    return ResourceExhausted("timestamp request: " + OpenSslErrors());
  }
  X509_ALGOR_set0(algo.get(), OBJ_nid2obj(NID_sha256), V_ASN1_NULL, nullptr);
  BN_bin2bn(nonce_bytes, sizeof(nonce_bytes), nonce_bn.get());
  Asn1IntPtr nonce(BN_to_ASN1_INTEGER(nonce_bn.get(), nullptr));
  // The set functions copy their arguments.
  if (!nonce || TS_REQ_set_version(req.get(), 1) != 1 || TS_MSG_IMPRINT_set_algo(imprint.get(), algo.get()) != 1 ||
      TS_MSG_IMPRINT_set_msg(imprint.get(), const_cast<unsigned char*>(digest.bytes.data()), Digest::kSize) != 1 ||
      TS_REQ_set_msg_imprint(req.get(), imprint.get()) != 1 || TS_REQ_set_nonce(req.get(), nonce.get()) != 1 ||
      TS_REQ_set_cert_req(req.get(), 1) != 1) {
    return InvalidArgument("timestamp request: " + OpenSslErrors());
  }
  return req;
}

class LocalTimestampAuthority final : public TimestampAuthority {
 public:
  ~LocalTimestampAuthority() override { TS_RESP_CTX_free(ctx_); }

  Result<std::string> Respond(std::string_view request_der) override {
    std::lock_guard<std::mutex> lock(mu_);
    BioPtr in = MemBio(request_der);
    TsRespPtr resp(TS_RESP_create_response(ctx_, in.get()));
    if (!resp) return InvalidArgument("local TSA: cannot create a response (" + OpenSslErrors() + ")");
    return ToDer<TS_RESP>(resp.get(), i2d_TS_RESP, "local TSA response");
  }

  static ASN1_INTEGER* NextSerial(TS_RESP_CTX*, void* self) {
    auto* tsa = static_cast<LocalTimestampAuthority*>(self);
    ASN1_INTEGER* serial = ASN1_INTEGER_new();
    if (serial != nullptr) ASN1_INTEGER_set_uint64(serial, ++tsa->serial_);
    return serial;
  }

  TS_RESP_CTX* ctx_ = nullptr;  // GUARDED_BY(mu_)

 private:
  std::mutex mu_;
  uint64_t serial_ = 0;  // GUARDED_BY(mu_) (only called from Respond)
};

Status ConfigureSigner(TS_RESP_CTX* ctx, std::string_view cert_pem, std::string_view key_pem, std::string_view chain_pem) {
  BioPtr cert_bio = MemBio(cert_pem), key_bio = MemBio(key_pem);
  X509Ptr cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  if (!cert) return InvalidArgument("local TSA: cert_pem: cannot parse (" + OpenSslErrors() + ")");
  PkeyPtr key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (!key) return InvalidArgument("local TSA: key_pem: cannot parse (" + OpenSslErrors() + ")");
  // set_signer_cert refuses a certificate without the critical timeStamping extended key usage.
  if (TS_RESP_CTX_set_signer_cert(ctx, cert.get()) != 1) {
    return InvalidArgument("local TSA: cert_pem is not a TSA certificate (needs critical extendedKeyUsage timeStamping): " + OpenSslErrors());
  }
  if (TS_RESP_CTX_set_signer_key(ctx, key.get()) != 1 || X509_check_private_key(cert.get(), key.get()) != 1) {
    return InvalidArgument("local TSA: key_pem does not match cert_pem: " + OpenSslErrors());
  }
  if (!chain_pem.empty()) {
    BioPtr chain_bio = MemBio(chain_pem);
    STACK_OF(X509)* chain = sk_X509_new_null();
    while (X509* c = PEM_read_bio_X509(chain_bio.get(), nullptr, nullptr, nullptr)) sk_X509_push(chain, c);
    OpenSslErrors();  // the loop ends on an expected "no start line"
    const int ok = TS_RESP_CTX_set_certs(ctx, chain);  // copies
    sk_X509_pop_free(chain, X509_free);
    if (ok != 1) return InvalidArgument("local TSA: chain_pem: " + OpenSslErrors());
  }
  return Status::Ok();
}

// Seconds since the epoch of an ASN1 time; -1 when it cannot be read.
int64_t UnixSeconds(const ASN1_GENERALIZEDTIME* t) {
  struct tm tm {};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return -1;
  return static_cast<int64_t>(timegm(&tm));
}

TimeAnchor DescribeToken(TS_TST_INFO* tst) {
  TimeAnchor a;
  a.gen_time_unix_s = UnixSeconds(TS_TST_INFO_get_time(tst));
  char oid[128] = {0};
  if (ASN1_OBJECT* policy = TS_TST_INFO_get_policy_id(tst)) OBJ_obj2txt(oid, sizeof(oid), policy, 1);
  a.policy_oid = oid;
  BnPtr serial(ASN1_INTEGER_to_BN(TS_TST_INFO_get_serial(tst), nullptr));
  if (serial) {
    char* hex = BN_bn2hex(serial.get());
    a.serial_hex = hex;
    OPENSSL_free(hex);
  }
  return a;
}

Result<X509_STORE*> RootStore(std::string_view roots_pem) {
  X509_STORE* store = X509_STORE_new();
  BioPtr bio = MemBio(roots_pem);
  int n = 0;
  while (X509* c = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(store, c);
    X509_free(c);
    ++n;
  }
  OpenSslErrors();
  if (n == 0) {
    X509_STORE_free(store);
    return InvalidArgument("tsa_roots_pem holds no certificate");
  }
  return store;
}

}  // namespace

namespace internal {

AnchorResult CheckTimeAnchor(std::string_view token_der, const Digest& digest, std::string_view tsa_roots_pem) {
  AnchorResult out{AnchorFailure::kInvalid, "", {}};
  const auto* p = reinterpret_cast<const unsigned char*>(token_der.data());
  Pkcs7Ptr token(d2i_PKCS7(nullptr, &p, static_cast<long>(token_der.size())));
  TstInfoPtr tst(token ? PKCS7_to_TS_TST_INFO(token.get()) : nullptr);
  if (!tst) {
    out.detail = "time_anchor is not a DER RFC 3161 TimeStampToken (" + OpenSslErrors() + ")";
    return out;
  }
  Result<X509_STORE*> store = RootStore(tsa_roots_pem);
  if (!store.has_value()) {
    out.detail = std::string(store.error().message());
    return out;
  }
  TsVerifyPtr ctx(TS_VERIFY_CTX_new());
  TS_VERIFY_CTX_set_flags(ctx.get(), TS_VFY_VERSION | TS_VFY_SIGNATURE);
  TS_VERIFY_CTX_set_store(ctx.get(), *store);  // the context owns the store from here
  if (TS_RESP_verify_token(ctx.get(), token.get()) != 1) {
    out.detail = "time_anchor signature does not verify against the trusted TSA roots (" + OpenSslErrors() + ")";
    return out;
  }
  TS_MSG_IMPRINT* imprint = TS_TST_INFO_get_msg_imprint(tst.get());
  const X509_ALGOR* algo = TS_MSG_IMPRINT_get_algo(imprint);
  const ASN1_OBJECT* algo_oid = nullptr;
  X509_ALGOR_get0(&algo_oid, nullptr, nullptr, algo);
  ASN1_OCTET_STRING* msg = TS_MSG_IMPRINT_get_msg(imprint);
  if (OBJ_obj2nid(algo_oid) != NID_sha256 || ASN1_STRING_length(msg) != static_cast<int>(Digest::kSize) ||
      std::memcmp(ASN1_STRING_get0_data(msg), digest.bytes.data(), Digest::kSize) != 0) {
    out.failure = AnchorFailure::kImprint;
    out.detail = "time_anchor timestamps a different digest than the certificate's " + digest.Hex();
    return out;
  }
  out.failure = AnchorFailure::kNone;
  out.anchor = DescribeToken(tst.get());
  return out;
}

}  // namespace internal

Result<std::unique_ptr<TimestampAuthority>> MakeLocalTimestampAuthority(std::string_view cert_pem, std::string_view key_pem,
                                                                        std::string_view policy_oid, std::string_view chain_pem) {
  auto tsa = std::make_unique<LocalTimestampAuthority>();
  tsa->ctx_ = TS_RESP_CTX_new();
  if (tsa->ctx_ == nullptr) return ResourceExhausted("local TSA: " + OpenSslErrors());
  FAK_RETURN_IF_ERROR(ConfigureSigner(tsa->ctx_, cert_pem, key_pem, chain_pem));
  Owned<ASN1_OBJECT, ASN1_OBJECT_free> policy(OBJ_txt2obj(std::string(policy_oid).c_str(), /*no_name=*/1));
  if (!policy) return InvalidArgument("local TSA: policy_oid '" + std::string(policy_oid) + "' is not a dotted OID");
  if (TS_RESP_CTX_set_def_policy(tsa->ctx_, policy.get()) != 1 || TS_RESP_CTX_add_md(tsa->ctx_, EVP_sha256()) != 1 ||
      TS_RESP_CTX_set_signer_digest(tsa->ctx_, EVP_sha256()) != 1 ||
      TS_RESP_CTX_set_ess_cert_id_digest(tsa->ctx_, EVP_sha256()) != 1) {
    return InvalidArgument("local TSA: " + OpenSslErrors());
  }
  TS_RESP_CTX_set_serial_cb(tsa->ctx_, &LocalTimestampAuthority::NextSerial, tsa.get());
  return std::unique_ptr<TimestampAuthority>(std::move(tsa));
}

Result<std::string> MakeTimestampRequest(const Digest& digest) {
  FAK_ASSIGN_OR_RETURN(TsReqPtr req, BuildRequest(digest));
  return ToDer<TS_REQ>(req.get(), i2d_TS_REQ, "timestamp request");
}

Status AnchorCertificate(DeletionCertificate* cert, TimestampAuthority& tsa) {
  FAK_ASSIGN_OR_RETURN(Digest digest, CertificateDigest(*cert));
  FAK_ASSIGN_OR_RETURN(TsReqPtr req, BuildRequest(digest));
  FAK_ASSIGN_OR_RETURN(std::string req_der, ToDer<TS_REQ>(req.get(), i2d_TS_REQ, "timestamp request"));
  FAK_ASSIGN_OR_RETURN(std::string resp_der, tsa.Respond(req_der));
  const auto* p = reinterpret_cast<const unsigned char*>(resp_der.data());
  TsRespPtr resp(d2i_TS_RESP(nullptr, &p, static_cast<long>(resp_der.size())));
  if (!resp) return VerificationFailed("timestamp response: not DER TimeStampResp (" + OpenSslErrors() + ")");
  // Status granted, same imprint, same nonce, version 1. Trust in the TSA is the verifier's call.
  TsVerifyPtr ctx(TS_REQ_to_TS_VERIFY_CTX(req.get(), nullptr));
  if (!ctx || TS_RESP_verify_response(ctx.get(), resp.get()) != 1) {
    return VerificationFailed("timestamp response rejected: " + OpenSslErrors());
  }
  FAK_ASSIGN_OR_RETURN(cert->time_anchor, ToDer<PKCS7>(TS_RESP_get_token(resp.get()), i2d_PKCS7, "timestamp token"));
  return Status::Ok();
}

Result<TimeAnchor> VerifyTimeAnchor(std::string_view token_der, const Digest& digest, std::string_view tsa_roots_pem) {
  AnchorResult r = internal::CheckTimeAnchor(token_der, digest, tsa_roots_pem);
  if (r.failure != AnchorFailure::kNone) return VerificationFailed(r.detail);
  return r.anchor;
}

}  // namespace fak
