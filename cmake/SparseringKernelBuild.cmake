# The identity of this build's kernels, computed at configure time from the sources listed in
# kernels/cuda/kernel_build_sources.cmake, so CPU-only builds (simulate, tune) know it too:
#   sha256:<SHA-256 of the lines "<SHA-256 of the file's code>  <path>\n", one per listed file, in order>
# where a file's code is its lines that are neither blank (spaces and tabs only) nor whole-line
# comments (first non-blank characters "//"), each followed by a newline: a comment edit leaves
# the identity, and so every calibration, as it is; any other edit moves it. Sets
#   SPARSERING_KERNEL_BUILD              "sha256:<64 hex>"
#   SPARSERING_KERNEL_BUILD_SOURCES      the listed paths
#   SPARSERING_KERNEL_BUILD_SOURCES_CXX  the same as C++ string literals, one per line
# Editing a listed file re-runs the configure step, so the identity never lags the sources.
# core/kernel_build.hpp compiles it in; kernels/cuda/kernel_build.sha256 holds the committed copy.
include(${PROJECT_SOURCE_DIR}/kernels/cuda/kernel_build_sources.cmake)

set(_sparsering_kernel_digests "")
set(SPARSERING_KERNEL_BUILD_SOURCES_CXX "")
foreach(path IN LISTS SPARSERING_KERNEL_BUILD_SOURCES)
  set(file ${PROJECT_SOURCE_DIR}/${path})
  if(NOT EXISTS ${file})
    message(FATAL_ERROR "kernels/cuda/kernel_build_sources.cmake lists ${path}, which does not exist")
  endif()
  file(READ ${file} code)
  if(NOT code MATCHES "\n$")
    string(APPEND code "\n")
  endif()
  # Whole-line comments, then blank lines, go; the leading newline makes the first line a match too.
  string(REGEX REPLACE "\n[ \t]*//[^\n]*" "" code "\n${code}")
  string(REGEX REPLACE "\n([ \t]*\n)+" "\n" code "${code}")
  string(SUBSTRING "${code}" 1 -1 code)
  string(SHA256 digest "${code}")
  string(APPEND _sparsering_kernel_digests "${digest}  ${path}\n")
  string(APPEND SPARSERING_KERNEL_BUILD_SOURCES_CXX "    \"${path}\",\n")
  set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${file})
endforeach()
set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${PROJECT_SOURCE_DIR}/kernels/cuda/kernel_build_sources.cmake)
string(SHA256 _sparsering_kernel_identity "${_sparsering_kernel_digests}")
set(SPARSERING_KERNEL_BUILD "sha256:${_sparsering_kernel_identity}")
message(STATUS "Kernel build identity: ${SPARSERING_KERNEL_BUILD}")
