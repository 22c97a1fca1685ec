// KVPager's vocabulary: the names of page-in failures (logs, metrics, replies).
#include "fak/session/kv_pager.h"

namespace fak {

std::string_view PageInFailureName(PageInFailure failure) {
  switch (failure) {
    case PageInFailure::kNone: return "none";
    case PageInFailure::kAbsent: return "absent";
    case PageInFailure::kAxis: return "axis";
    case PageInFailure::kChecksum: return "checksum";
    case PageInFailure::kDenied: return "denied";
    case PageInFailure::kTenant: return "tenant";
    case PageInFailure::kTruncated: return "truncated";
    case PageInFailure::kMalformed: return "malformed";
    case PageInFailure::kUnavailable: return "unavailable";
    case PageInFailure::kOversized: return "oversized";
  }
  return "?";
}

}  // namespace fak
