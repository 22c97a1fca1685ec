# The C example (examples/c) against the installed package, built with a C compiler:
#   1. `cmake --install` this build tree into a fresh prefix;
#   2. compile the installed fak/c/fak.h on its own as C99 (-pedantic -Werror) and as C++;
#   3. configure examples/c with -DCMAKE_PREFIX_PATH=<prefix>, build it and run it;
#   4. build and run the same main.c with `cc` and only `pkg-config --static fak` flags.
# Run by ctest (tests/CMakeLists.txt) with -DBUILD_DIR -DSOURCE_DIR -DWORK_DIR -DCONFIG -DGENERATOR
# -DCC -DCXX -DLIBDIR [-DC_FLAGS -DLINKER_FLAGS] (a sanitizer build's flags).
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR CC CXX LIBDIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "c_install_test: -D${var}=... is required")
  endif()
endforeach()
if(NOT CONFIG)
  set(CONFIG Release)
endif()

function(step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "c_install_test: ${name} failed (${rc})\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

# What a successful run prints: a verified certificate and the evicted cache's digest.
function(check_output name output)
  if(NOT output MATCHES "certificate verified: yes" OR NOT output MATCHES "cache digest after  [0-9a-f]+")
    message(FATAL_ERROR "c_install_test: ${name} did not verify its certificate:\n${output}")
  endif()
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --config ${CONFIG})

set(header ${prefix}/include/fak/c/fak.h)
if(NOT EXISTS ${header})
  message(FATAL_ERROR "c_install_test: ${header} was not installed")
endif()
file(WRITE ${WORK_DIR}/header_check.c "#include <fak/c/fak.h>\n")
step("fak/c/fak.h as C99" ${CC} -std=c99 -pedantic -Wall -Wextra -Werror -fsyntax-only -I${prefix}/include
     ${WORK_DIR}/header_check.c)
step("fak/c/fak.h as C++" ${CXX} -x c++ -std=c++20 -Wall -Wextra -Werror -fsyntax-only -I${prefix}/include
     ${WORK_DIR}/header_check.c)

step("configure examples/c" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
     -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=${CONFIG} -DCMAKE_C_COMPILER=${CC} -DCMAKE_CXX_COMPILER=${CXX}
     "-DCMAKE_C_FLAGS=${C_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}")
step("build examples/c" ${CMAKE_COMMAND} --build ${WORK_DIR}/build --config ${CONFIG})
step("run fak_c_example" ${WORK_DIR}/build/fak_c_example)
message("${step_output}")
check_output("fak_c_example" "${step_output}")

find_program(PKG_CONFIG pkg-config)
if(PKG_CONFIG)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${prefix}/${LIBDIR}/pkgconfig
                          ${PKG_CONFIG} --cflags --libs --static fak
                  RESULT_VARIABLE rc OUTPUT_VARIABLE pc_flags ERROR_VARIABLE pc_err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "c_install_test: pkg-config fak failed: ${pc_err}")
  endif()
  separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
  separate_arguments(extra_flags UNIX_COMMAND "${C_FLAGS} ${LINKER_FLAGS}")
  step("cc with pkg-config" ${CC} -std=c99 -Wall -Wextra -Wpedantic ${extra_flags} ${SOURCE_DIR}/main.c
       -o ${WORK_DIR}/fak_c_example_pc ${pc_flags})
  step("run fak_c_example (pkg-config)" ${WORK_DIR}/fak_c_example_pc)
  check_output("fak_c_example (pkg-config)" "${step_output}")
endif()
