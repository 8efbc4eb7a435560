// Scratch memory pool (see scratch_pool.hpp). Exercised by every launcher that takes scratch,
// so by every test in tests/kernels_gpu/.
#include "kernels/cuda/scratch_pool.hpp"

#include <mutex>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"

namespace sparsering {

cudaMemPool_t scratch_pool() {
  static std::mutex mutex;
  static std::vector<cudaMemPool_t> pools;  // by device; null until created
  int device = 0;
  SPARSERING_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  if (pools.size() <= static_cast<size_t>(device)) pools.resize(static_cast<size_t>(device) + 1, nullptr);
  cudaMemPool_t& pool = pools[static_cast<size_t>(device)];
  if (pool == nullptr) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    SPARSERING_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
    uint64_t keep = kScratchPoolKeepBytes;
    SPARSERING_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  }
  return pool;
}

}  // namespace sparsering
