// Helpers for store, recall and crash tests: scoped temporary directories and raw file surgery.
#ifndef FAK_TESTS_STORE_STORE_TEST_UTIL_H_
#define FAK_TESTS_STORE_STORE_TEST_UTIL_H_

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "fak/core/digest.h"

namespace fak::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/fak_store_test_XXXXXX";
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~ScopedTempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Where the directory store keeps a (non-inline) blob; see docs/store.md.
inline std::string BlobFilePath(const std::string& store_dir, const Digest& d) {
  return store_dir + "/blobs/" + d.Hex().substr(0, 2) + "/" + d.Hex();
}

inline std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

}  // namespace fak::testing

#endif  // FAK_TESTS_STORE_STORE_TEST_UTIL_H_
