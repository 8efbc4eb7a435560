# Install rules and the exported CMake package, so another project can
#   find_package(sparsering REQUIRED)
#   target_link_libraries(app PRIVATE sparsering::sim)
# after `cmake --install`. Installed layout (README "Install and find_package"):
#   bin/sparsering                              the CLI
#   lib/libsparsering_<name>.a                  common, core, traces, sim, tuner, kernels (+ kernels_cuda)
#   include/sparsering/<folder>/...             headers, same folders as the source tree, so
#                                               #include "sim/step/simulation.hpp" works
#   lib/cmake/sparsering/                       sparseringConfig.cmake, version file, targets file
#   share/sparsering/configs/                   the shipped configs (models, clusters, gpus, ...)
# Checked by the ctest install_find_package (tests/install/CMakeLists.txt).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(SPARSERING_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/sparsering)
set(SPARSERING_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/sparsering)
set(SPARSERING_INSTALL_CONFIGDIR ${CMAKE_INSTALL_DATADIR}/sparsering/configs)

# Exported libraries (and what their link interfaces name: the generated Chakra protobuf code and
# the warning-flags target, linked privately but recorded for static libraries).
set(_sparsering_exported sparsering_flags sparsering_common sparsering_core sparsering_traces sparsering_kernels
                         sparsering_sim sparsering_chakra_proto sparsering_tuner)
if(TARGET sparsering_kernels_cuda)
  list(APPEND _sparsering_exported sparsering_kernels_cuda)
endif()

# Include folders given as build-tree paths become build-only; installed consumers use the
# installed include root instead (imported include folders are system folders anyway).
foreach(target IN LISTS _sparsering_exported)
  string(REGEX REPLACE "^sparsering_" "" export_name ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
  foreach(property INTERFACE_INCLUDE_DIRECTORIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES)
    get_target_property(dirs ${target} ${property})
    if(NOT dirs)
      continue()
    endif()
    set(wrapped "")
    foreach(dir IN LISTS dirs)
      if(dir MATCHES "^\\$<")
        list(APPEND wrapped "${dir}")
      else()
        list(APPEND wrapped "$<BUILD_INTERFACE:${dir}>")
      endif()
    endforeach()
    if(property STREQUAL "INTERFACE_INCLUDE_DIRECTORIES")
      list(APPEND wrapped "$<INSTALL_INTERFACE:${SPARSERING_INSTALL_INCLUDEDIR}>")
    endif()
    set_target_properties(${target} PROPERTIES ${property} "${wrapped}")
  endforeach()
endforeach()

install(TARGETS ${_sparsering_exported} EXPORT sparseringTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS sparsering RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Headers of the exported libraries, keeping the source tree's folders; generated headers
# (sparsering/version.hpp, the Chakra protobuf header) from the build tree.
install(DIRECTORY common core traces sim tuner kernels
        DESTINATION ${SPARSERING_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h" PATTERN "*.cuh"
        PATTERN "python" EXCLUDE)
install(DIRECTORY ${PROJECT_BINARY_DIR}/common/generated/ ${PROJECT_BINARY_DIR}/tuner/generated/
        DESTINATION ${SPARSERING_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
install(DIRECTORY configs/ DESTINATION ${SPARSERING_INSTALL_CONFIGDIR})

install(EXPORT sparseringTargets NAMESPACE sparsering:: DESTINATION ${SPARSERING_INSTALL_CMAKEDIR})
set(SPARSERING_EXPORTS_CUDA ${SPARSERING_HAVE_CUDA})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/sparseringConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/sparseringConfig.cmake
                              INSTALL_DESTINATION ${SPARSERING_INSTALL_CMAKEDIR}
                              PATH_VARS SPARSERING_INSTALL_CONFIGDIR SPARSERING_INSTALL_INCLUDEDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/sparseringConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/sparseringConfig.cmake ${PROJECT_BINARY_DIR}/sparseringConfigVersion.cmake
        DESTINATION ${SPARSERING_INSTALL_CMAKEDIR})
