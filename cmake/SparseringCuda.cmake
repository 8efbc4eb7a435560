# The one place that decides whether the CUDA kernels and the NCCL ring runtime are built.
#   SPARSERING_CUDA=AUTO  build them when nvcc is found (the default)
#   SPARSERING_CUDA=ON    require nvcc
#   SPARSERING_CUDA=OFF   CPU only
# Results: SPARSERING_HAVE_CUDA, SPARSERING_HAVE_NCCL (booleans) and, when NCCL is found,
# the imported target sparsering::nccl.
set(SPARSERING_CUDA "AUTO" CACHE STRING "Build CUDA kernels: AUTO, ON or OFF")
set_property(CACHE SPARSERING_CUDA PROPERTY STRINGS AUTO ON OFF)

set(SPARSERING_HAVE_CUDA OFF)
set(SPARSERING_HAVE_NCCL OFF)
if(NOT SPARSERING_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # 90a: Hopper's architecture-specific features (wgmma), which the Hopper attention path
    # needs and which run on compute capability 9.0 only; 80 covers Ampere and Ada.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90a 80)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    # CMake < 3.26 does not know nvcc's C++20 flag (CMAKE_CUDA_STANDARD 20 then fails at generate
    # time with "requires the language dialect CUDA20"); tell it, for every directory.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
      list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
      set(CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20)
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(SPARSERING_HAVE_CUDA ON)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu)
    if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      add_library(sparsering::nccl UNKNOWN IMPORTED)
      set_target_properties(sparsering::nccl PROPERTIES
        IMPORTED_LOCATION ${NCCL_LIBRARY} INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
      set(SPARSERING_HAVE_NCCL ON)
    endif()
  elseif(SPARSERING_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SPARSERING_CUDA=ON but no CUDA compiler (nvcc) was found")
  endif()
endif()
message(STATUS "sparsering: CUDA kernels ${SPARSERING_HAVE_CUDA}, NCCL rings ${SPARSERING_HAVE_NCCL}")
