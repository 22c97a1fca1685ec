// Version strings compiled into the library (see include/fak/core/version.h).
#include "fak/core/version.h"

#define FAK_STR_INNER_(x) #x
#define FAK_STR_(x) FAK_STR_INNER_(x)

#if defined(__clang__)
#define FAK_COMPILER_ID_ "clang-" FAK_STR_(__clang_major__) "." FAK_STR_(__clang_minor__) "." FAK_STR_(__clang_patchlevel__)
#elif defined(__GNUC__)
#define FAK_COMPILER_ID_ "gcc-" FAK_STR_(__GNUC__) "." FAK_STR_(__GNUC_MINOR__) "." FAK_STR_(__GNUC_PATCHLEVEL__)
#else
#define FAK_COMPILER_ID_ "unknown-compiler"
#endif

namespace fak {

std::string_view LibraryVersion() { return FAK_VERSION_STRING; }

std::string_view KernelBuild() { return "kernels-r" FAK_STR_(FAK_KERNELS_REVISION) " " FAK_COMPILER_ID_; }

}  // namespace fak
