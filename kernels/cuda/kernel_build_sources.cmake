# The sources whose contents decide how fast the kernels that `sparsering calibrate` times run:
# the forward and backward attention kernels and their launch configuration (grid, threads,
# shared memory), the backward's index transposition, the device code they include (tile loads,
# warp MMAs, the token layout arithmetic that runs inside the kernels), the parameter structs
# they read, and the host code every launch runs through (stream-ordered scratch memory). cmake/SparseringKernelBuild.cmake hashes them into this build's kernel identity; a
# calibration records the identity it was measured on (docs/calibration.md). Paths relative to the
# source root, sorted. A file with device code that a listed file includes must be listed too
# (checked by tests/core/kernel_build_test.cpp). Changing this list changes the identity.
set(SPARSERING_KERNEL_BUILD_SOURCES
  common/host_device.hpp
  core/token_layout.hpp
  kernels/attention_params.hpp
  kernels/cuda/device_buffer.hpp
  kernels/cuda/hopper_async.cuh
  kernels/cuda/key_items.cuh
  kernels/cuda/scratch_pool.cu
  kernels/cuda/scratch_pool.hpp
  kernels/cuda/sparse_attn_bwd.cu
  kernels/cuda/sparse_attn_bwd_columns_sm90.cu
  kernels/cuda/sparse_attn_bwd_sm90.cu
  kernels/cuda/sparse_attn_fwd.cu
  kernels/cuda/sparse_attn_fwd_sm90.cu
  kernels/cuda/sparse_index_transpose.cu
  kernels/cuda/tensor_map.cu
  kernels/cuda/warp_mma.cuh)
