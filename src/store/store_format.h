// On-disk constants of the directory BlobStore and of recall images (specified in docs/store.md).
#ifndef FAK_SRC_STORE_STORE_FORMAT_H_
#define FAK_SRC_STORE_STORE_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace fak::internal {

// <dir>/FAK_BLOBSTORE: one line, "fak-blobstore <version>\n".
inline constexpr std::string_view kStoreMarkerFile = "FAK_BLOBSTORE";
inline constexpr std::string_view kStoreMarkerPrefix = "fak-blobstore ";
inline constexpr uint32_t kStoreFormatVersion = 1;

inline constexpr std::string_view kBlobsDir = "blobs";  // blobs/<first 2 hex>/<64 hex>
inline constexpr std::string_view kTmpDir = "tmp";      // temporaries; emptied on open
inline constexpr std::string_view kJournalFile = "journal";
// Held (flock) by the one process that has the store open; its content is unused.
inline constexpr std::string_view kLockFile = "LOCK";

// Blob file: 56-byte header, then the payload.
//   0  magic "FAKBLOB1" (8)   8 version u32 LE   12 flags u32 (0)   16 payload size u64 LE
//   24 sha256 of the payload (32)   56 payload
inline constexpr char kBlobMagic[8] = {'F', 'A', 'K', 'B', 'L', 'O', 'B', '1'};
inline constexpr uint32_t kBlobVersion = 1;
inline constexpr size_t kBlobHeaderBytes = 56;

// Journal: 16-byte header "FAKJRNL1" + version u32 + 4 zero bytes, then records:
//   0 body size u32 LE (bytes from the type through the payload)   4 type u8   5 digest (32)
//   37 payload (body size - 33 bytes)   then check (8): the first 8 bytes of sha256 over
//   everything from the body size through the payload.
inline constexpr char kJournalMagic[8] = {'F', 'A', 'K', 'J', 'R', 'N', 'L', '1'};
inline constexpr uint32_t kJournalVersion = 1;
inline constexpr size_t kJournalHeaderBytes = 16;
inline constexpr size_t kRecordPrefixBytes = 4;
inline constexpr size_t kRecordCheckBytes = 8;
enum class RecordType : uint8_t {
  kInlinePut = 1,  // payload: the blob's bytes (≤ kInlineMaxBytes)
  kRemove = 2,     // payload: none; drops the inline payload and pin count of the digest
  kPinCount = 3,   // payload: pin count u32 LE (absolute, so replay is idempotent)
};
// The largest record a writer produces: an inline put of kInlineMaxBytes.
inline constexpr size_t kMaxRecordBytes = kRecordPrefixBytes + 1 + 32 + 256 + kRecordCheckBytes;

// Recall image files: <root>/images/<name>.json, canonical JSON (see docs/store.md).
inline constexpr uint32_t kRecallImageVersion = 1;

}  // namespace fak::internal

#endif  // FAK_SRC_STORE_STORE_FORMAT_H_
