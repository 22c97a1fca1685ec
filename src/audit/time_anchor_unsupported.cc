// RFC 3161 time anchors in a build without them (FAK_WITH_TSA=OFF): every call says so, and a
// certificate that carries an anchor fails verification (kAnchorInvalid) rather than passing
// unchecked — a build that cannot check a claim never vouches for it.
#include "fak/audit/time_anchor.h"
#include "src/audit/audit_internal.h"

namespace fak {
namespace {

constexpr char kOff[] = "fak was built without RFC 3161 time anchors (FAK_WITH_TSA=OFF)";

}  // namespace

Result<std::unique_ptr<TimestampAuthority>> MakeLocalTimestampAuthority(std::string_view, std::string_view,
                                                                        std::string_view, std::string_view) {
  return Unsupported(kOff);
}
Result<std::string> MakeTimestampRequest(const Digest&) { return Unsupported(kOff); }
Status AnchorCertificate(DeletionCertificate*, TimestampAuthority&) { return Unsupported(kOff); }
Result<TimeAnchor> VerifyTimeAnchor(std::string_view, const Digest&, std::string_view) { return Unsupported(kOff); }

namespace internal {
AnchorResult CheckTimeAnchor(std::string_view, const Digest&, std::string_view) {
  return AnchorResult{AnchorFailure::kInvalid, kOff, {}};
}
}  // namespace internal

}  // namespace fak
