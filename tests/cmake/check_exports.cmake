# The export check (ctest fak_exports): the dynamic symbol table of a shared libfak holds only the
# public surface, so a host can depend on nothing else.
#   - Every exported symbol must be a fak_* C function, or a C++ entity of namespace fak (a function,
#     a variable, or a public class's vtable, typeinfo, typeinfo name, guard variable or thunk)
#     outside fak::internal, fak::kernels, fak::capi and anonymous namespaces. Nothing of std::,
#     nlohmann:: or any other third party; no compiler or linker symbol is allowed either (the
#     link that makes the library adds none to its dynamic table: no _init, _fini or _end).
#   - Every fak_* function declared in the C headers must be exported (so a forgotten FAK_EXPORT on
#     the C API fails here; the C++ API is checked by linking programs against the shared library).
# The scope is read from the mangled name (`_ZN3fak…`, `_ZTVN3fak…`), which is exact where a
# demangled one is not (a template instantiation's demangled name starts with its return type);
# the demangled name is what the failure prints.
# Run by ctest (tests/CMakeLists.txt) with -DLIBRARY=<the .so> -DNM=<nm> [-DC_HEADERS=<include/fak/c>].
cmake_minimum_required(VERSION 3.25)  # IN_LIST, and the policies of the project
foreach(var LIBRARY NM)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_exports: -D${var}=... is required")
  endif()
endforeach()

# nm -p keeps the symbol table's order, so the mangled and demangled listings pair line by line.
function(list_symbols out)
  execute_process(COMMAND ${NM} -D --defined-only -p ${ARGN} ${LIBRARY}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "check_exports: ${NM} failed on ${LIBRARY} (${rc}): ${err}")
  endif()
  string(REPLACE ";" "\\;" text "${text}")
  string(REGEX REPLACE "\n$" "" text "${text}")
  string(REPLACE "\n" ";" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()
list_symbols(mangled)
list_symbols(demangled -C)
list(LENGTH mangled n)
list(LENGTH demangled n_demangled)
if(NOT n EQUAL n_demangled OR n EQUAL 0)
  message(FATAL_ERROR "check_exports: ${LIBRARY} lists ${n} symbols mangled and ${n_demangled} demangled")
endif()

set(bad "")
set(exported_c "")
set(n_c 0)
set(n_cxx 0)
math(EXPR last "${n} - 1")
foreach(i RANGE ${last})
  list(GET mangled ${i} line)
  list(GET demangled ${i} pretty)
  # "<address> <type> <name>"
  if(NOT line MATCHES "^[0-9a-fA-F]* *([A-Za-z]) (.+)$")
    list(APPEND bad "unparsed nm line: ${line}")
    continue()
  endif()
  set(type "${CMAKE_MATCH_1}")
  set(name "${CMAKE_MATCH_2}")
  string(REGEX REPLACE "^[0-9a-fA-F]* *[A-Za-z] " "" pretty "${pretty}")
  if(name MATCHES "^fak_[a-z0-9_]+$" AND type STREQUAL "T")  # the C API
    list(APPEND exported_c ${name})
    math(EXPR n_c "${n_c} + 1")
    continue()
  endif()
  # Strip what a vtable (TV), typeinfo (TI), typeinfo name (TS), VTT (TT), guard variable (GV) or
  # thunk (Th/Tv, with their offsets) is of, leaving the entity's encoding.
  set(entity "${name}")
  string(REGEX REPLACE "^_Z(TV|TI|TS|TT|GV|Thn?[0-9]+_|Tvn?[0-9]+_n?[0-9]+_)" "_Z" entity "${entity}")
  # _ZN (nested name; V/K/R/O qualify a member function) or _ZZN (a local entity of a function),
  # whose first component is fak.
  if(entity MATCHES "^_ZZ?N[VKRO]*3fak" AND
     NOT entity MATCHES "^_ZZ?N[VKRO]*3fak(8internal|7kernels|4capi|12_GLOBAL__N_)")
    math(EXPR n_cxx "${n_cxx} + 1")
    continue()
  endif()
  list(APPEND bad "${type} ${pretty}")
endforeach()

set(missing "")
if(DEFINED C_HEADERS)
  # A declaration starts at column 0 (FAK_EXPORT and a return type); comment lines start with " *".
  file(GLOB headers ${C_HEADERS}/*.h)
  foreach(header ${headers})
    file(STRINGS ${header} lines REGEX "^[A-Za-z].*[ *](fak_[a-z0-9_]+)\\(")
    foreach(decl ${lines})
      if(decl MATCHES "^typedef")
        continue()
      endif()
      string(REGEX MATCH "[ *](fak_[a-z0-9_]+)\\(" _ "${decl}")
      if(NOT CMAKE_MATCH_1 IN_LIST exported_c)
        get_filename_component(header_name ${header} NAME)
        list(APPEND missing "${CMAKE_MATCH_1} (fak/c/${header_name})")
      endif()
    endforeach()
  endforeach()
endif()

list(LENGTH bad n_bad)
list(LENGTH missing n_missing)
message("check_exports: ${LIBRARY}: ${n} exported symbols: ${n_c} fak_* C functions, ${n_cxx} of namespace fak, ${n_bad} outside the public surface; ${n_missing} C API functions not exported")
if(n_bad GREATER 0 OR n_missing GREATER 0)
  list(SORT bad)
  string(REPLACE ";" "\n  " bad_text "${bad}")
  string(REPLACE ";" "\n  " missing_text "${missing}")
  message(FATAL_ERROR "check_exports: exported outside the public surface (${n_bad}):\n  ${bad_text}\n"
                      "C API declared but not exported (${n_missing}):\n  ${missing_text}\n"
                      "Mark public API with FAK_EXPORT (fak/core/export.h); everything else stays hidden.")
endif()
