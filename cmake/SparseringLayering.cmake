# The layer rule, checked on the CMake targets at configure time: a library may link only the
# libraries of its own layer and the layers below it (docs/architecture.md). A lower layer that
# links a higher one fails the configure step, naming both targets.
#
#   layer 0  sparsering_common
#   layer 1  sparsering_core, sparsering_traces
#   layer 2  sparsering_kernels, sparsering_kernels_cuda, sparsering_kernels_capi,
#            sparsering_ring_runtime, sparsering_sim
#   layer 3  sparsering_tuner
#   layer 4  sparsering_measure, sparsering_measure_gpu
# The kernels and the simulator share a layer but never link each other: the kernels (and the
# NCCL ring runtime) run without the simulator, and the simulator reads calibration data only.
# The header-level rule (what may include what) is checked by tests/architecture/layering_test.py.

set(_sparsering_layer_sparsering_common 0)
set(_sparsering_layer_sparsering_core 1)
set(_sparsering_layer_sparsering_traces 1)
set(_sparsering_layer_sparsering_kernels 2)
set(_sparsering_layer_sparsering_kernels_cuda 2)
set(_sparsering_layer_sparsering_kernels_capi 2)
set(_sparsering_layer_sparsering_ring_runtime 2)
set(_sparsering_layer_sparsering_sim 2)
set(_sparsering_layer_sparsering_tuner 3)
set(_sparsering_layer_sparsering_measure 4)
set(_sparsering_layer_sparsering_measure_gpu 4)
set(_sparsering_kernel_side sparsering_kernels sparsering_kernels_cuda sparsering_kernels_capi sparsering_ring_runtime)

# The project library a link item names (sparsering::x or sparsering_x), or "" for anything else.
function(_sparsering_library_of item out)
  set(name "")
  if(item MATCHES "^sparsering::(.+)$")
    set(name "sparsering_${CMAKE_MATCH_1}")
  elseif(item MATCHES "^sparsering_")
    set(name "${item}")
  endif()
  if(NOT DEFINED _sparsering_layer_${name})
    set(name "")
  endif()
  set(${out} "${name}" PARENT_SCOPE)
endfunction()

function(sparsering_check_layering)
  foreach(target IN ITEMS sparsering_common sparsering_core sparsering_traces sparsering_kernels
                          sparsering_kernels_cuda sparsering_kernels_capi sparsering_ring_runtime
                          sparsering_sim sparsering_tuner sparsering_measure sparsering_measure_gpu)
    if(NOT TARGET ${target})
      continue()
    endif()
    get_target_property(links ${target} LINK_LIBRARIES)
    get_target_property(interface_links ${target} INTERFACE_LINK_LIBRARIES)
    foreach(item IN LISTS links interface_links)
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.+)>$" "\\1" item "${item}")
      _sparsering_library_of("${item}" linked)
      if(linked STREQUAL "" OR linked STREQUAL target)
        continue()
      endif()
      set(mine ${_sparsering_layer_${target}})
      set(theirs ${_sparsering_layer_${linked}})
      if(theirs GREATER mine)
        message(FATAL_ERROR "layering: ${target} (layer ${mine}) links ${linked} (layer ${theirs}); "
                            "a library may link only its own layer and the layers below (docs/architecture.md)")
      endif()
      set(kernel_side_target OFF)
      set(kernel_side_linked OFF)
      if(target IN_LIST _sparsering_kernel_side)
        set(kernel_side_target ON)
      endif()
      if(linked IN_LIST _sparsering_kernel_side)
        set(kernel_side_linked ON)
      endif()
      if(theirs EQUAL mine AND NOT kernel_side_target STREQUAL kernel_side_linked)
        message(FATAL_ERROR "layering: ${target} links ${linked}; the kernels and the simulator never "
                            "link each other (docs/architecture.md)")
      endif()
    endforeach()
  endforeach()
endfunction()
