// RAII owners for device memory, streams and events (docs/kernels.md). DeviceBuffer is
// a typed cudaMalloc'd array; StreamBuffer is stream-ordered scratch from the scratch pool
// (scratch_pool.hpp) that launchers use for workspaces so callers pass no workspace pointers.
// Host code only; exercised by every test in tests/kernels_gpu/.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/scratch_pool.hpp"

namespace sparsering {

/// A device array of `count` elements of T, freed on destruction. Movable, not copyable.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// Allocates `count` elements (uninitialised). Throws CudaError on failure.
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count > 0) SPARSERING_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)));
  }
  /// Allocates and copies `host` to the device (synchronous).
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

  /// Copies host.size() (<= size()) elements host -> device (synchronous).
  void upload(const std::vector<T>& host) {
    if (!host.empty()) SPARSERING_CUDA_CHECK(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  /// Copies the whole buffer device -> host (synchronous).
  std::vector<T> download() const {
    std::vector<T> host(count_);
    if (count_ > 0) SPARSERING_CUDA_CHECK(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost));
    return host;
  }
  /// Sets every byte to `byte` (0xFF on float data gives NaN: the tests' poison).
  void fill_bytes(int byte) {
    if (count_ > 0) SPARSERING_CUDA_CHECK(cudaMemset(data_, byte, bytes()));
  }

 private:
  void release() noexcept {
    if (data_ != nullptr) (void)cudaFree(data_);  // no throw from a destructor
    data_ = nullptr;
    count_ = 0;
  }
  T* data_ = nullptr;
  size_t count_ = 0;
};

/// Stream-ordered scratch memory: allocated from the scratch pool on `stream`, freed with
/// cudaFreeAsync on the same stream when the owner goes out of scope, so kernels queued before
/// the destructor still see valid memory.
class StreamBuffer {
 public:
  /// Allocates `bytes` on `stream` (0 bytes gives a null pointer).
  StreamBuffer(size_t bytes, cudaStream_t stream) : stream_(stream), bytes_(bytes) {
    if (bytes > 0) SPARSERING_CUDA_CHECK(cudaMallocFromPoolAsync(&data_, bytes, scratch_pool(), stream));
  }
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
  ~StreamBuffer() {
    if (data_ != nullptr) (void)cudaFreeAsync(data_, stream_);
  }
  /// The memory as an array of T.
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  cudaStream_t stream_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

/// An owned CUDA stream (non-blocking with respect to the legacy default stream).
class CudaStream {
 public:
  CudaStream() { SPARSERING_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  ~CudaStream() { (void)cudaStreamDestroy(stream_); }
  cudaStream_t get() const { return stream_; }
  /// Waits for all work queued on the stream; throws CudaError if any of it failed.
  void synchronize() const { SPARSERING_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace sparsering
