// On-disk format of FileDenylist (specified in docs/store.md §6): constants, one record's encoding
// and the replay of a whole file. Exposed so tests can craft damaged files byte by byte.
#ifndef FAK_SRC_SCREEN_DENYLIST_FORMAT_H_
#define FAK_SRC_SCREEN_DENYLIST_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fak/core/digest.h"
#include "fak/core/status.h"

namespace fak::internal {

// Header (16 bytes): magic "FAKDENY1", version u32 LE, 4 zero bytes. Then records:
//   0 body size u32 LE (bytes from the type through the reason)   4 type u8 (1 = add)
//   5 digest (32)   37 reason (body size - 33 bytes, at most FileDenylist::kMaxReasonBytes)
//   then check (8): the first 8 bytes of sha256 over everything from the body size through the reason.
inline constexpr char kDenylistMagic[8] = {'F', 'A', 'K', 'D', 'E', 'N', 'Y', '1'};
inline constexpr uint32_t kDenylistVersion = 1;
inline constexpr size_t kDenylistHeaderBytes = 16;
inline constexpr size_t kDenylistSizeBytes = 4;
inline constexpr size_t kDenylistCheckBytes = 8;
inline constexpr size_t kDenylistMinBody = 1 + Digest::kSize;
inline constexpr size_t kDenylistMaxReasonBytes = 4096;
inline constexpr uint8_t kDenylistAdd = 1;
// Held (flock) by the one opener: <path>.lock.
inline constexpr std::string_view kDenylistLockSuffix = ".lock";

std::string DenylistHeader();
// One add record; `reason` must be at most kDenylistMaxReasonBytes.
std::string EncodeDenylistRecord(const Digest& digest, std::string_view reason);

struct DenylistReplay {
  std::vector<std::pair<Digest, std::string>> adds;  // in file order; a later add of a digest wins
  size_t valid_end = 0;                               // end of the last whole record
  uint64_t torn_tail_bytes = 0;                       // a record cut short at the end (dropped)
};
// Replays a whole file's bytes. Corruption (naming `path` and the record's offset) for a damaged
// header or record, Unsupported for another version. A final record cut short is a torn tail.
Result<DenylistReplay> ReplayDenylist(std::string_view data, const std::string& path);

}  // namespace fak::internal

#endif  // FAK_SRC_SCREEN_DENYLIST_FORMAT_H_
