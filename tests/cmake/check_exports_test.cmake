# The export check (tests/cmake/check_exports.cmake) on a small fixture library: built with default
# visibility it exports fak::internal, fak::kernels, a function outside fak
# and a std:: instantiation, and the check must fail naming each of them (and a C API function
# its header declares but the library lacks) but none of the public ones; built hidden, with the
# public entities marked as FAK_EXPORT marks them, it must pass.
# Run by ctest (tests/CMakeLists.txt) with -DCHECK=<check_exports.cmake> -DCXX=<c++ compiler>
# -DNM=<nm> -DINCLUDE_DIR=<include/> -DWORK_DIR=<scratch dir>.
cmake_minimum_required(VERSION 3.25)
foreach(var CHECK CXX NM INCLUDE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_exports_test: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
file(WRITE ${WORK_DIR}/fixture.cc [=[
#include <string>
#include <vector>
#include "fak/core/export.h"
namespace fak {
class FAK_EXPORT Widget {  // a public class with a virtual: vtable and typeinfo exported
 public:
  virtual ~Widget();
  virtual int Size() const;
};
Widget::~Widget() = default;
int Widget::Size() const { return 1; }
FAK_EXPORT std::vector<int> PublicFunction(int n) { return std::vector<int>(n, 1); }
namespace internal { std::string InternalHelper() { return "x"; } }
namespace kernels { float KernelDot(const float* a, int n) { float s = 0; for (int i = 0; i < n; ++i) s += a[i]; return s; } }
}  // namespace fak
int StrayGlobal(int x) { return x + 1; }
extern "C" FAK_EXPORT int fak_present(void) { return 0; }
// An out-of-line std:: member instantiated here: default visibility (libstdc++'s namespace std).
template class std::vector<long>;
]=])
file(WRITE ${WORK_DIR}/c/fixture_api.h "FAK_EXPORT int fak_present(void);\nFAK_EXPORT int fak_absent(void);\n")

function(build_fixture name)
  execute_process(COMMAND ${CXX} -std=c++20 -shared -fPIC ${ARGN} -I${INCLUDE_DIR} ${WORK_DIR}/fixture.cc
                          -o ${WORK_DIR}/${name}.so
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "check_exports_test: building the ${name} fixture failed: ${err}")
  endif()
endfunction()
function(run_check name)
  execute_process(COMMAND ${CMAKE_COMMAND} -DLIBRARY=${WORK_DIR}/${name}.so -DNM=${NM} ${ARGN} -P ${CHECK}
                  RESULT_VARIABLE result OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
  set(rc "${result}" PARENT_SCOPE)
  set(out "${stdout}${stderr}" PARENT_SCOPE)
endfunction()

# Everything exported: must fail, naming each leak and the missing C function, and no public symbol.
build_fixture(leaky)
run_check(leaky -DC_HEADERS=${WORK_DIR}/c)
if(rc EQUAL 0)
  message(FATAL_ERROR "check_exports_test: the leaky fixture passed the check:\n${out}")
endif()
foreach(leak "fak::internal::InternalHelper" "fak::kernels::KernelDot" "StrayGlobal" "std::vector<long"
             "fak_absent (fak/c/fixture_api.h)")
  string(FIND "${out}" "${leak}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "check_exports_test: the check did not name ${leak}:\n${out}")
  endif()
endforeach()
foreach(public "fak::Widget" "fak::PublicFunction" " fak_present")
  string(FIND "${out}" "${public}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "check_exports_test: the check named the public ${public}:\n${out}")
  endif()
endforeach()

# Hidden by default, public surface marked, the version script: must pass.
build_fixture(sealed -fvisibility=hidden -fvisibility-inlines-hidden
              -Wl,--version-script=${CMAKE_CURRENT_LIST_DIR}/../../cmake/fak.map)
run_check(sealed)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "check_exports_test: the sealed fixture failed the check:\n${out}")
endif()
if(NOT out MATCHES "1 fak_\\* C functions, [1-9][0-9]* of namespace fak, 0 outside")
  message(FATAL_ERROR "check_exports_test: the sealed fixture exports the wrong surface:\n${out}")
endif()
# A host subclassing a public class needs its vtable and typeinfo from the library.
execute_process(COMMAND ${NM} -D --defined-only -C ${WORK_DIR}/sealed.so OUTPUT_VARIABLE symbols)
foreach(symbol "vtable for fak::Widget" "typeinfo for fak::Widget" "fak::PublicFunction(int)" "fak_present")
  string(FIND "${symbols}" "${symbol}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "check_exports_test: the sealed fixture does not export ${symbol}:\n${symbols}")
  endif()
endforeach()
message("check_exports_test: the leaky fixture fails, the sealed one passes")
