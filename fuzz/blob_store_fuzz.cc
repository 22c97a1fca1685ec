// Fuzzes the directory blob store's open path: the input describes a store directory, which is
// written out and opened with OpenDirectoryBlobStore (journal replay, blob-file scan, index
// rebuild), strictly and with salvage. A store that opens is then read whole, and must take a Put,
// a Pin and a Remove. The input is a list of chunks, each a tag byte, a u16 LE length and that
// many bytes:
//   'H' the journal header          'J' raw journal bytes (appended as they are)
//   'R' a journal record: type u8, digest choice u8 (even: sha256 of the payload, odd: of another
//       text), payload; encoded with a valid check, so replay gets past the checksum
//   'B' a blob file (header + payload), named by the sha256 of its bytes after the 56-byte header
//   'F' a file under blobs/ named by its first bytes (up to the first '|', letters and digits only)
//   'M' the marker file's content (default: the current version's line)
// Chunks past the end of the input are cut short.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "fak/store/blob_store.h"
#include "fuzz/fuzz_util.h"
#include "src/store/blob_journal.h"
#include "src/store/store_format.h"

namespace {

struct StoreFiles {
  std::string marker = std::string(fak::internal::kStoreMarkerPrefix) +
                       std::to_string(fak::internal::kStoreFormatVersion) + "\n";
  std::string journal;
  std::vector<std::pair<std::string, std::string>> files;  // path under blobs/, content
};

std::string BlobPath(const fak::Digest& d) {
  const std::string hex = d.Hex();
  return hex.substr(0, 2) + "/" + hex;
}

StoreFiles Decode(std::string_view in) {
  StoreFiles s;
  while (in.size() >= 3) {
    const char tag = in[0];
    const size_t n = std::min<size_t>(static_cast<uint8_t>(in[1]) | static_cast<uint8_t>(in[2]) << 8, in.size() - 3);
    const std::string_view body = in.substr(3, n);
    in.remove_prefix(3 + n);
    switch (tag) {
      case 'H': s.journal += fak::internal::JournalHeader(); break;
      case 'J': s.journal.append(body); break;
      case 'R': {
        if (body.size() < 2) break;
        const std::string_view payload = body.substr(2);
        const fak::Digest d = body[1] % 2 == 0 ? fak::Digest::Of(payload) : fak::Digest::Of(body.substr(1, 1));
        s.journal += fak::internal::EncodeJournalRecord(static_cast<fak::internal::RecordType>(body[0]), d, payload);
        break;
      }
      case 'B': {
        const std::string_view payload = body.size() > fak::internal::kBlobHeaderBytes
                                             ? body.substr(fak::internal::kBlobHeaderBytes) : std::string_view();
        s.files.emplace_back(BlobPath(fak::Digest::Of(payload)), std::string(body));
        break;
      }
      case 'F': {
        const size_t bar = std::min(body.find('|'), body.size());
        std::string name;
        for (char c : body.substr(0, std::min<size_t>(bar, 80))) {
          if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) name += c;
        }
        if (name.empty()) name = "x";
        const std::string dir = name.size() >= 2 ? name.substr(0, 2) : "zz";
        s.files.emplace_back(dir + "/" + name, std::string(body.substr(std::min(bar + 1, body.size()))));
        break;
      }
      case 'M': s.marker.assign(body); break;
      default: break;
    }
  }
  return s;
}

void Exercise(fak::BlobStore& store) {
  auto list = store.List();
  FAK_FUZZ_CHECK(list.has_value(), list.error().ToString());
  for (const fak::Digest& d : *list) {
    auto bytes = store.Get(d);
    // A listed blob either verifies or reports why; what it returns must be its digest's preimage.
    if (bytes.has_value()) FAK_FUZZ_CHECK(fak::Digest::Of(*bytes) == d, d.Hex());
  }
  (void)store.Stats();
  auto put = store.Put("fuzz payload");
  if (!put.has_value()) return;  // a damaged store may refuse writes; it must not crash
  if (store.Pin(*put).ok()) (void)store.Unpin(*put);
  (void)store.Remove(*put);
  if (!list->empty()) (void)store.Remove(list->front());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const StoreFiles files = Decode(fak::fuzz::AsText(data, size));
  const std::string dir = fak::fuzz::ScratchDir() + "/store";
  for (bool salvage : {false, true}) {
    fak::fuzz::ResetDir(dir);
    fak::fuzz::WriteFile(dir + "/" + std::string(fak::internal::kStoreMarkerFile), files.marker);
    if (!files.journal.empty()) fak::fuzz::WriteFile(dir + "/" + std::string(fak::internal::kJournalFile), files.journal);
    for (const auto& [path, content] : files.files) {
      const std::string full = dir + "/" + std::string(fak::internal::kBlobsDir) + "/" + path;
      std::filesystem::create_directories(std::filesystem::path(full).parent_path());
      fak::fuzz::WriteFile(full, content);
    }
    fak::BlobStoreOptions options;
    options.sync = false;
    options.salvage_journal = salvage;
    auto store = fak::OpenDirectoryBlobStore(dir, options);
    if (store.has_value()) Exercise(**store);
  }
  return 0;
}
