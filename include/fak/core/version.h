// Version: the library release and the kernel revision, the Producer axis of every cache binding.
//
// KV made by one build of fak is served as a HIT only to the same producer (architecture §6), so
// the version here must equal project(fak VERSION ...) in CMakeLists.txt (a test checks it).
// FAK_KERNELS_REVISION is bumped whenever any kernel's arithmetic changes, even by one rounding,
// so KV cached under the old kernels misses instead of being served across the change.
#ifndef FAK_CORE_VERSION_H_
#define FAK_CORE_VERSION_H_

#include <string_view>

#include "fak/core/export.h"

#define FAK_VERSION_MAJOR 0
#define FAK_VERSION_MINOR 1
#define FAK_VERSION_PATCH 0
#define FAK_VERSION_STRING "0.1.0"
#define FAK_KERNELS_REVISION 6

namespace fak {

// The version the linked library was built as ("0.1.0"); may differ from FAK_VERSION_STRING when a
// host compiles against other headers than the library it links.
FAK_EXPORT std::string_view LibraryVersion();
// The kernel build: kernel revision and compiler, e.g. "kernels-r1 gcc-12.2.0". Two builds with the
// same string produce bit-identical results within one tier.
FAK_EXPORT std::string_view KernelBuild();

}  // namespace fak

#endif  // FAK_CORE_VERSION_H_
