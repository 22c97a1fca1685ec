// Helpers shared by the libFuzzer targets: a private scratch directory for readers that take a
// path, a file writer, and a check that aborts loudly (libFuzzer saves the input as a crash) when
// an invariant the library documents does not hold.
#ifndef FAK_FUZZ_FUZZ_UTIL_H_
#define FAK_FUZZ_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include <unistd.h>

namespace fak::fuzz {

// A directory of this process's own, created once (in /dev/shm when there is one: the readers
// under test map and fsync files, and tmpfs keeps that cheap). Left behind on exit: libFuzzer
// ends by _exit, and the next run makes a fresh one.
inline const std::string& ScratchDir() {
  static const std::string dir = [] {
    std::filesystem::path base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    std::filesystem::path d = base / ("fak_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return dir;
}

// Removes everything under `path` and recreates it empty.
inline void ResetDir(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  std::filesystem::create_directories(path);
}

inline void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The whole file (fixed inputs a target loads once, like a TSA root); empty when unreadable.
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Splits `in` at the first occurrence of `sep` (2-part inputs: config + weights, tokenizer +
// tokenizer_config). Without `sep` the whole input is the first part.
inline std::pair<std::string_view, std::string_view> SplitOnce(std::string_view in, std::string_view sep) {
  const size_t at = in.find(sep);
  if (at == std::string_view::npos) return {in, {}};
  return {in.substr(0, at), in.substr(at + sep.size())};
}

}  // namespace fak::fuzz

// An invariant of the API under test failed: print why and abort so libFuzzer keeps the input.
#define FAK_FUZZ_CHECK(cond, what)                                                     \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "FAK_FUZZ_CHECK failed: %s (%s:%d): %s\n", #cond, __FILE__, \
                   __LINE__, std::string(what).c_str());                               \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)

#endif  // FAK_FUZZ_FUZZ_UTIL_H_
