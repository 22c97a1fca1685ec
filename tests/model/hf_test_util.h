// Helpers for the Hugging Face checkpoint tests: fixture paths, a scratch directory, and a minimal
// safetensors writer so a test can derive a broken or altered checkpoint from a committed one.
#ifndef FAK_TESTS_MODEL_HF_TEST_UTIL_H_
#define FAK_TESTS_MODEL_HF_TEST_UTIL_H_

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fak/io/safetensors.h"
#include "src/core/str_cat.h"

namespace fak::testing {

inline std::string HfData(const std::string& name) { return std::string(FAK_TEST_DATA_DIR) + "/hf/" + name; }

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A fresh directory under the temp dir, removed with its contents at scope exit.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(
            (std::filesystem::temp_directory_path() / ("fak_hf_" + name + "_" + std::to_string(::getpid()))).string()) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  void Write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ + "/" + name, std::ios::binary) << text;
  }

 private:
  std::string path_;
};

struct StEntry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

// Every tensor of a safetensors file, in name order (empty on error: the caller's loads then fail).
inline std::vector<StEntry> ReadEntries(const std::string& path) {
  std::vector<StEntry> out;
  auto file = SafetensorsFile::Open(path);
  if (!file.has_value()) return out;
  for (const SafetensorsTensor& t : (*file)->tensors()) {
    out.push_back({t.name, std::string(SafetensorsDtypeName(t.dtype)), t.shape,
                   std::string(reinterpret_cast<const char*>(t.data), t.size_bytes)});
  }
  return out;
}

// Writes entries back to back as a safetensors file (header padded to 8 bytes like the reference
// writer). The shape is written as given, so a test can make it disagree with the bytes.
inline void WriteSafetensors(const std::string& path, const std::vector<StEntry>& entries) {
  std::string header = "{", data;
  for (const StEntry& e : entries) {
    std::string shape;
    for (int64_t d : e.shape) {
      if (!shape.empty()) shape += ',';
      shape += std::to_string(d);
    }
    if (header.size() > 1) header += ',';
    header += std::string("\"") + e.name + "\":{\"dtype\":\"" + e.dtype +
              "\",\"shape\":[" + shape + "],\"data_offsets\":[" + std::to_string(data.size()) + "," +
              std::to_string(data.size() + e.bytes.size()) + "]}";
    data += e.bytes;
  }
  header += "}";
  while ((8 + header.size()) % 8 != 0) header += ' ';
  uint64_t n = header.size();
  char len[8];
  std::memcpy(len, &n, 8);
  std::ofstream(path, std::ios::binary) << std::string(len, 8) << header << data;
}

}  // namespace fak::testing

#endif  // FAK_TESTS_MODEL_HF_TEST_UTIL_H_
