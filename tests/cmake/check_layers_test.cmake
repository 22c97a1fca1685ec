# The layer check (cmake/check_layers.cmake) on small fixture trees: a clean tree passes, and each
# way of reaching a layer that is not below — quoted, angled, indented, `#  include`, through `..`
# — fails the check and names the file and the include.
# Run by ctest (tests/CMakeLists.txt) with -DCHECK=<cmake/check_layers.cmake> -DWORK_DIR=<scratch dir>.
foreach(var CHECK WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_layers_test: -D${var}=... is required")
  endif()
endforeach()

# Two layers: `low` (src/low, public headers fak/low/) and `high` (src/high), which links low.
set(layers "low=src/low:|high=src/high:low")

# Writes a fixture whose src/<file_layer>/x.cc holds `line`, runs the check on it, and returns its
# exit code and output in `rc` and `out`.
function(run_check name file_layer line)
  set(root ${WORK_DIR}/${name})
  file(REMOVE_RECURSE ${root})
  file(WRITE ${root}/include/fak/low/low.h "// low's public header\n")
  file(WRITE ${root}/src/low/low_impl.h "// low's private header\n")
  file(WRITE ${root}/src/high/high.h "// high's private header\n")
  file(WRITE ${root}/src/${file_layer}/x.cc "// fixture\n#include <string>\n${line}\nint x;\n")
  execute_process(COMMAND ${CMAKE_COMMAND} "-DLAYERS=${layers}" -DROOT=${root} -DSTAMP=${root}/stamp
                          -P ${CHECK}
                  RESULT_VARIABLE result OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
  set(rc "${result}" PARENT_SCOPE)
  set(out "${stdout}${stderr}" PARENT_SCOPE)
endfunction()

function(expect_pass name file_layer line)
  run_check(${name} ${file_layer} "${line}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "check_layers_test: '${line}' in src/${file_layer} should pass:\n${out}")
  endif()
endfunction()

function(expect_fail name file_layer line what)
  run_check(${name} ${file_layer} "${line}")
  if(rc EQUAL 0)
    message(FATAL_ERROR "check_layers_test: '${line}' in src/${file_layer} should fail the check")
  endif()
  string(FIND "${out}" "src/${file_layer}/x.cc includes ${what}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "check_layers_test: the failure for '${line}' does not name the file and include:\n${out}")
  endif()
endfunction()

# Allowed: a layer below, by any spelling, and the layer's own folder.
expect_pass(below_quoted       high "#include \"src/low/low_impl.h\"")
expect_pass(below_angled       high "#include <fak/low/low.h>")
expect_pass(below_indented     high "  #  include \"fak/low/low.h\"")
expect_pass(own_folder         low  "#include \"src/low/low_impl.h\"")
expect_pass(third_party        low  "#include <microhttpd.h>")

# Refused: a layer above, however spelled, the umbrella header, and any `..`.
expect_fail(up_quoted          low  "#include \"src/high/high.h\""          "src/high/high.h")
expect_fail(up_angled_src      low  "#include <src/high/high.h>"            "src/high/high.h")
expect_fail(up_angled_fak      low  "#include <fak/high/high.h>"            "fak/high/high.h")
expect_fail(up_indented        low  "    #include \"src/high/high.h\""      "src/high/high.h")
expect_fail(up_hash_space      low  "#  include <src/high/high.h>"          "src/high/high.h")
expect_fail(up_tab             low  "\t#\tinclude\t\"src/high/high.h\""     "src/high/high.h")
expect_fail(umbrella           high "#include \"fak/fak.h\""                "fak/fak.h")
expect_fail(dotdot_relative    low  "#include \"../high/high.h\""           "../high/high.h")
expect_fail(dotdot_inside      high "#include <src/low/../low/low_impl.h>"  "src/low/../low/low_impl.h")

file(REMOVE_RECURSE ${WORK_DIR})
message("check_layers_test: every case passed")
