// Ed25519 keys through OpenSSL EVP: generate, sign, verify, PEM save (0600) and load (refusing
// keys other users can read).
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstdio>
#include <cstring>

#include "src/audit/audit_internal.h"
#include "src/core/dcheck.h"
#include "src/core/path.h"

namespace fak {

using internal::OpenSslErrors;

namespace {

struct PkeyFree { void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); } };
struct MdCtxFree { void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); } };
struct BioFree { void operator()(BIO* p) const { BIO_free(p); } };
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

Result<PublicKey> RawPublicKey(EVP_PKEY* pkey) {
  PublicKey pub;
  size_t len = pub.bytes.size();
  if (EVP_PKEY_get_raw_public_key(pkey, pub.bytes.data(), &len) != 1 || len != pub.bytes.size()) {
    return InvalidArgument("ed25519 public key: " + OpenSslErrors());
  }
  return pub;
}

}  // namespace

struct SigningKey::Impl {
  PkeyPtr pkey;
};

SigningKey::SigningKey(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {
  Result<PublicKey> raw = RawPublicKey(impl_->pkey.get());
  FAK_DCHECK(raw.has_value());  // checked by the factories before construction
  public_key_ = *raw;
}

std::string PublicKey::Hex() const {
  return internal::HexEncode(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

Result<PublicKey> PublicKey::FromHex(std::string_view hex) {
  if (hex.size() != 64) return InvalidArgument("public key hex must be 64 characters, got " + std::to_string(hex.size()));
  FAK_ASSIGN_OR_RETURN(std::string raw, internal::HexDecode(hex, "public key"));
  PublicKey pub;
  std::memcpy(pub.bytes.data(), raw.data(), pub.bytes.size());
  return pub;
}

bool PublicKey::VerifySignature(std::string_view message, std::string_view signature) const {
  if (signature.size() != 64) return false;
  PkeyPtr pkey(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, bytes.data(), bytes.size()));
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (!pkey || !ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, pkey.get()) != 1) {
    OpenSslErrors();  // clear the queue: an unusable key is simply "does not verify"
    return false;
  }
  const int rc = EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                                  reinterpret_cast<const unsigned char*>(message.data()), message.size());
  if (rc != 1) OpenSslErrors();
  return rc == 1;
}

Result<SigningKey> SigningKey::Generate() {
  PkeyPtr pkey(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  if (!pkey) return Unsupported("ed25519 key generation: " + OpenSslErrors());
  auto impl = std::make_shared<Impl>();
  impl->pkey = std::move(pkey);
  return SigningKey(std::move(impl));
}

Result<SigningKey> SigningKey::FromPem(std::string_view pem) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return ResourceExhausted("BIO_new_mem_buf: " + OpenSslErrors());
  PkeyPtr pkey(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!pkey) return InvalidArgument("private key PEM: cannot parse (" + OpenSslErrors() + ")");
  if (EVP_PKEY_get_id(pkey.get()) != EVP_PKEY_ED25519) {
    return InvalidArgument(std::string("private key PEM: key type is ") + EVP_PKEY_get0_type_name(pkey.get()) + ", want ED25519");
  }
  FAK_RETURN_IF_ERROR(RawPublicKey(pkey.get()).status());
  auto impl = std::make_shared<Impl>();
  impl->pkey = std::move(pkey);
  return SigningKey(std::move(impl));
}

Result<SigningKey> SigningKey::LoadPem(const std::string& path, Env* env) {
  if (env == nullptr) env = Env::Default();
  // Judge the file by lstat before reading it: a link, a non-file or a key others can read is refused.
  Result<FileInfo> info = env->GetFileInfo(path);
  if (!info.has_value()) {
    if (info.error().code() == StatusCode::kNotFound) return NotFound("no private key " + path);
    return info.error();
  }
  if (!info->is_regular) return FailedPrecondition("private key " + path + " is not a regular file");
  if ((info->mode & 077) != 0) {
    char mode[16];  // "%04o" of the permission bits: 4 digits
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(info->mode & 07777));
    return FailedPrecondition("private key " + path + " has mode " + mode +
                              ": readable or writable by group or others; refusing it (chmod 600)");
  }
  FAK_ASSIGN_OR_RETURN(std::string pem, env->ReadFile(path));  // refuses a link swapped in since
  Result<SigningKey> key = FromPem(pem);
  OPENSSL_cleanse(pem.data(), pem.size());
  if (!key.has_value()) return key.error().WithContext(path);
  return key;
}

Status SigningKey::SavePem(const std::string& path, Env* env) const {
  if (env == nullptr) env = Env::Default();
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), impl_->pkey.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return InvalidArgument("encoding private key as PEM: " + OpenSslErrors());
  }
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  // Owner-only from the first byte, and never over an existing key.
  Result<std::unique_ptr<WritableFile>> file = env->NewPrivateFile(path);
  if (!file.has_value()) {
    if (file.error().code() == StatusCode::kFailedPrecondition) {
      return FailedPrecondition("private key " + path + " already exists; refusing to overwrite it");
    }
    return file.error();
  }
  Status s = (*file)->Append(std::string_view(data, static_cast<size_t>(len)));
  if (s.ok()) s = (*file)->Sync();
  if (s.ok()) s = (*file)->Close();
  if (s.ok()) s = env->SyncDir(internal::ParentDir(path));  // the new entry too, or a power cut loses the key
  if (!s.ok()) (void)env->RemoveFile(path);  // never leave half a key behind
  return s;
}

Result<std::string> SigningKey::Sign(std::string_view message) const {
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  std::string sig(64, '\0');
  size_t len = sig.size();
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, impl_->pkey.get()) != 1 ||
      EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1) {
    return InvalidArgument("ed25519 sign: " + OpenSslErrors());
  }
  sig.resize(len);
  return sig;
}

}  // namespace fak
