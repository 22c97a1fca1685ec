# The embedding example against the installed package, as a host project would build it:
#   1. `cmake --install` this build tree into a fresh prefix;
#   2. compile every installed public header on its own (each must need only std and fak/*.h);
#   3. configure examples/embed with -DCMAKE_PREFIX_PATH=<prefix>, build it and run it;
#   4. build and run the same main.cc with only `pkg-config --static fak` flags (fak.pc is relocatable).
# Run by ctest (tests/CMakeLists.txt) with -DBUILD_DIR -DSOURCE_DIR -DWORK_DIR -DCONFIG -DGENERATOR
# -DCXX -DLIBDIR [-DLAUNCHER] [-DTOOL=1 -DBINDIR=bin] [-DCXX_FLAGS -DLINKER_FLAGS] (a sanitizer build's flags:
# the installed static library needs the same runtime in the host).
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR CXX LIBDIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_install_test: -D${var}=... is required")
  endif()
endforeach()
if(NOT CONFIG)
  set(CONFIG Release)
endif()

function(step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "embed_install_test: ${name} failed (${rc})\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --config ${CONFIG})

# Every installed header compiles standalone.
file(GLOB_RECURSE headers RELATIVE ${prefix}/include ${prefix}/include/fak/*.h)
list(LENGTH headers n_headers)
if(n_headers LESS 10)
  message(FATAL_ERROR "embed_install_test: only ${n_headers} headers installed under ${prefix}/include/fak")
endif()
foreach(header ${headers})
  string(MAKE_C_IDENTIFIER ${header} stem)
  file(WRITE ${WORK_DIR}/headers/${stem}.cc "#include \"${header}\"\n")
  step("standalone ${header}" ${CXX} -std=c++20 -fsyntax-only -Wall -Wextra -Wno-unused-parameter -Werror -I${prefix}/include ${WORK_DIR}/headers/${stem}.cc)
endforeach()

set(launcher_arg)
if(LAUNCHER)
  set(launcher_arg -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
step("configure examples/embed" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
     -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=${CONFIG} -DCMAKE_CXX_COMPILER=${CXX} ${launcher_arg}
     "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}")
step("build examples/embed" ${CMAKE_COMMAND} --build ${WORK_DIR}/build --config ${CONFIG})
step("run fak_embed" ${WORK_DIR}/build/fak_embed)
message("${step_output}")
if(NOT step_output MATCHES "cache digest after  [0-9a-f]+")
  message(FATAL_ERROR "embed_install_test: fak_embed printed no cache digest")
endif()
find_program(PKG_CONFIG pkg-config)
if(PKG_CONFIG)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${prefix}/${LIBDIR}/pkgconfig
                          ${PKG_CONFIG} --cflags --libs --static fak
                  RESULT_VARIABLE rc OUTPUT_VARIABLE pc_flags ERROR_VARIABLE pc_err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "embed_install_test: pkg-config fak failed: ${pc_err}")
  endif()
  separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
  # The include path must lead into this prefix (not to a stale install elsewhere).
  set(pc_include)
  foreach(flag ${pc_flags})
    if(flag MATCHES "^-I(.+)$")
      get_filename_component(pc_include "${CMAKE_MATCH_1}" REALPATH)
    endif()
  endforeach()
  get_filename_component(want_include "${prefix}/include" REALPATH)
  if(NOT pc_include STREQUAL want_include)
    message(FATAL_ERROR "embed_install_test: fak.pc points at '${pc_include}', not the install prefix '${want_include}'")
  endif()
  separate_arguments(extra_flags UNIX_COMMAND "${CXX_FLAGS} ${LINKER_FLAGS}")
  step("pkg-config build" ${CXX} -std=c++20 ${extra_flags} ${SOURCE_DIR}/main.cc -o ${WORK_DIR}/fak_embed_pc ${pc_flags})
  step("run fak_embed (pkg-config)" ${WORK_DIR}/fak_embed_pc)
endif()

if(TOOL)  # the build has the fak tool: it must be installed and run from the prefix
  step("installed fak --help" ${prefix}/${BINDIR}/fak --help)
endif()
