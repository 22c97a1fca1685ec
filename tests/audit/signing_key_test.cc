// SigningKey: ed25519 generate/sign/verify, PEM saved 0600, loaded back, and refused when other
// users could read it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "fak/audit/audit.h"
#include "tests/audit/test_pki.h"
#include "tests/support/fault_injection_env.h"
#include "tests/test_util.h"

namespace fak {
namespace {

class SigningKeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fak_keys_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

// A saved key is durable: its directory entry is fsynced too, so a power cut keeps it (issue 20).
TEST_F(SigningKeyTest, SavedKeySurvivesPowerLoss) {
  testing::FaultInjectionEnv env;
  ASSERT_OK_AND_ASSIGN(SigningKey key, SigningKey::Generate());
  ASSERT_OK(key.SavePem(Path("key.pem"), &env));
  ASSERT_OK(env.PowerLoss());
  ASSERT_OK_AND_ASSIGN(SigningKey loaded, SigningKey::LoadPem(Path("key.pem")));
  EXPECT_EQ(loaded.public_key(), key.public_key());
}

TEST_F(SigningKeyTest, SignAndVerify) {
  ASSERT_OK_AND_ASSIGN(SigningKey key, SigningKey::Generate());
  ASSERT_OK_AND_ASSIGN(std::string sig, key.Sign("hello"));
  EXPECT_EQ(sig.size(), 64u);
  EXPECT_TRUE(key.public_key().VerifySignature("hello", sig));
  EXPECT_FALSE(key.public_key().VerifySignature("hellO", sig));
  sig[3] ^= 1;
  EXPECT_FALSE(key.public_key().VerifySignature("hello", sig));
  EXPECT_FALSE(key.public_key().VerifySignature("hello", "short"));
  ASSERT_OK_AND_ASSIGN(SigningKey other, SigningKey::Generate());
  EXPECT_NE(other.public_key(), key.public_key());
  ASSERT_OK_AND_ASSIGN(PublicKey parsed, PublicKey::FromHex(key.public_key().Hex()));
  EXPECT_EQ(parsed, key.public_key());
  EXPECT_FALSE(PublicKey::FromHex("abcd").has_value());
}

TEST_F(SigningKeyTest, SaveWritesMode0600AndLoadsBack) {
  ASSERT_OK_AND_ASSIGN(SigningKey key, SigningKey::Generate());
  const std::string path = Path("issuer.pem");
  const mode_t old_umask = ::umask(0);  // even with a permissive umask the file is 0600
  Status saved = key.SavePem(path);
  ::umask(old_umask);
  ASSERT_OK(saved);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_OK_AND_ASSIGN(SigningKey loaded, SigningKey::LoadPem(path));
  EXPECT_EQ(loaded.public_key(), key.public_key());
  ASSERT_OK_AND_ASSIGN(std::string sig, loaded.Sign("m"));
  EXPECT_TRUE(key.public_key().VerifySignature("m", sig));
  // Never overwrites a key.
  EXPECT_EQ(key.SavePem(path).code(), StatusCode::kFailedPrecondition);
}

TEST_F(SigningKeyTest, RefusesKeysOthersCanRead) {
  ASSERT_OK_AND_ASSIGN(SigningKey key, SigningKey::Generate());
  const std::string path = Path("issuer.pem");
  ASSERT_OK(key.SavePem(path));
  for (mode_t mode : {0644, 0640, 0604, 0660}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    auto loaded = SigningKey::LoadPem(path);
    ASSERT_FALSE(loaded.has_value()) << std::oct << mode;
    EXPECT_EQ(loaded.error().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(loaded.error().message().find("readable or writable by group or others"), std::string_view::npos)
        << loaded.error().ToString();
  }
  ASSERT_EQ(::chmod(path.c_str(), 0400), 0);
  EXPECT_TRUE(SigningKey::LoadPem(path).has_value());
}

TEST_F(SigningKeyTest, RefusesSymlinksMissingFilesAndOtherKeyTypes) {
  ASSERT_OK_AND_ASSIGN(SigningKey key, SigningKey::Generate());
  ASSERT_OK(key.SavePem(Path("real.pem")));
  ASSERT_EQ(::symlink(Path("real.pem").c_str(), Path("link.pem").c_str()), 0);
  EXPECT_FALSE(SigningKey::LoadPem(Path("link.pem")).has_value());
  EXPECT_EQ(SigningKey::LoadPem(Path("absent.pem")).status().code(), StatusCode::kNotFound);

  const std::string ec_pem = testing::SharedTestPki().tsa_key_pem;  // an EC P-256 key
  auto ec = SigningKey::FromPem(ec_pem);
  ASSERT_FALSE(ec.has_value());
  EXPECT_EQ(ec.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ec.error().message().find("want ED25519"), std::string_view::npos) << ec.error().ToString();
  EXPECT_EQ(SigningKey::FromPem("garbage").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fak
