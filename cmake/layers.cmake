# fak's layers as CMake targets: fak_layer() makes one object library per source folder that links
# only the layers named below it; fak_check_layers() adds a build step that fails when a file
# includes a folder (src/<layer>/, fak/<layer>/, kernels/) outside its layer's closure of DEPS.
# The object libraries are only the unit of enforcement; users link `fak`, their union.
# An APPLICATION layer (the HTTP server) is checked the same way but is not part of the union: it is
# a static library of its own over `fak`.

set(FAK_LAYERS "" CACHE INTERNAL "")              # the layers of libfak, in order
set(FAK_APPLICATION_LAYERS "" CACHE INTERNAL "")  # checked like layers, built over libfak

# fak_layer(NAME DIR DEPS <layers below> [LIBS <third-party targets used to compile it>] [APPLICATION])
function(fak_layer name dir)
  cmake_parse_arguments(ARG "APPLICATION" "" "DEPS;LIBS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir}/*.cc)
  if(FAK_LAYER_EXCLUDE_${name})  # a feature that is off leaves these sources out
    list(FILTER srcs EXCLUDE REGEX "${FAK_LAYER_EXCLUDE_${name}}")
  endif()
  if(ARG_APPLICATION)
    # Links the union, not the layers' object libraries (whose objects would be archived twice).
    # Its own headers are found from the project root ("src/<dir>/…"), by it and by what links it.
    add_library(fak_${name} STATIC ${srcs})
    target_include_directories(fak_${name} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
    target_link_libraries(fak_${name} PUBLIC fak)
  else()
    add_library(fak_${name} OBJECT ${srcs})
    target_include_directories(fak_${name} PUBLIC ${PROJECT_SOURCE_DIR}/include PRIVATE ${PROJECT_SOURCE_DIR})
    fak_hidden_by_default(fak_${name})  # exports only what include/fak/ marks FAK_EXPORT
  endif()
  target_compile_options(fak_${name} PRIVATE ${FAK_WARNINGS})
  target_link_libraries(fak_${name} PRIVATE ${ARG_LIBS} nlohmann_json::nlohmann_json)
  set(closure "")
  foreach(dep IN LISTS ARG_DEPS)
    if(NOT TARGET fak_${dep} OR dep IN_LIST FAK_APPLICATION_LAYERS)
      message(FATAL_ERROR "fak_layer(${name}): dependency '${dep}' must be a layer declared before it")
    endif()
    if(NOT ARG_APPLICATION)
      target_link_libraries(fak_${name} PUBLIC fak_${dep})
    endif()
    list(APPEND closure ${dep} ${FAK_LAYER_CLOSURE_${dep}})
  endforeach()
  list(REMOVE_DUPLICATES closure)
  set(FAK_LAYER_CLOSURE_${name} "${closure}" CACHE INTERNAL "")
  set(FAK_LAYER_DIR_${name} "${dir}" CACHE INTERNAL "")
  if(ARG_APPLICATION)
    set(FAK_APPLICATION_LAYERS ${FAK_APPLICATION_LAYERS} ${name} CACHE INTERNAL "")
  else()
    set(FAK_LAYERS ${FAK_LAYERS} ${name} CACHE INTERNAL "")
  endif()
endfunction()

function(fak_check_layers)
  set(args "")
  set(inputs "")
  foreach(layer IN LISTS FAK_LAYERS FAK_APPLICATION_LAYERS)
    string(REPLACE ";" "," closure "${FAK_LAYER_CLOSURE_${layer}}")
    list(APPEND args "${layer}=${FAK_LAYER_DIR_${layer}}:${closure}")
    file(GLOB_RECURSE files CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${FAK_LAYER_DIR_${layer}}/*.cc
         ${PROJECT_SOURCE_DIR}/${FAK_LAYER_DIR_${layer}}/*.h ${PROJECT_SOURCE_DIR}/include/fak/${layer}/*.h)
    list(APPEND inputs ${files})
  endforeach()
  string(REPLACE ";" "|" args "${args}")
  set(stamp ${PROJECT_BINARY_DIR}/fak_layers.stamp)
  add_custom_command(OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} "-DLAYERS=${args}" -DROOT=${PROJECT_SOURCE_DIR} -DSTAMP=${stamp}
            -P ${PROJECT_SOURCE_DIR}/cmake/check_layers.cmake
    DEPENDS ${inputs} ${PROJECT_SOURCE_DIR}/cmake/check_layers.cmake
    COMMENT "Checking that every layer includes only layers below it" VERBATIM)
  add_custom_target(fak_layering DEPENDS ${stamp})
  foreach(layer IN LISTS FAK_LAYERS FAK_APPLICATION_LAYERS)
    add_dependencies(fak_${layer} fak_layering)
  endforeach()
endfunction()
