// All sends and receives of one hop go into one NCCL group, so the GPUs' transfers run at once as
// in a ring step. Timing is on the host (chrono) between two full synchronisations, divided by
// the hops in between: the GPUs' own clocks cannot time a transfer that spans devices.
#include "measure/bench/hop_bench.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "common/error.hpp"
#include "common/median.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace sparsering {
namespace {

void nccl_check(ncclResult_t result, const char* what) {
  if (result != ncclSuccess) throw std::runtime_error(str("NCCL ", what, " failed: ", ncclGetErrorString(result)));
}

/// Communicators, streams and buffers of every device, released on destruction.
class HopWorld {
 public:
  HopWorld(const std::vector<int>& devices, int64_t max_bytes) : devices_(devices) {
    const auto n = devices.size();
    comms_.assign(n, nullptr);
    nccl_check(ncclCommInitAll(comms_.data(), static_cast<int>(n), devices.data()), "ncclCommInitAll");
    streams_.assign(n, nullptr);
    send_.assign(n, nullptr);
    recv_.assign(n, nullptr);
    for (size_t d = 0; d < n; ++d) {
      SPARSERING_CUDA_CHECK(cudaSetDevice(devices[d]));
      SPARSERING_CUDA_CHECK(cudaStreamCreateWithFlags(&streams_[d], cudaStreamNonBlocking));
      SPARSERING_CUDA_CHECK(cudaMalloc(&send_[d], static_cast<size_t>(max_bytes)));
      SPARSERING_CUDA_CHECK(cudaMalloc(&recv_[d], static_cast<size_t>(max_bytes)));
      SPARSERING_CUDA_CHECK(cudaMemset(send_[d], static_cast<int>(d + 1), static_cast<size_t>(max_bytes)));
    }
  }
  HopWorld(const HopWorld&) = delete;
  HopWorld& operator=(const HopWorld&) = delete;
  ~HopWorld() {
    for (size_t d = 0; d < devices_.size(); ++d) {
      (void)cudaSetDevice(devices_[d]);
      if (streams_[d] != nullptr) (void)cudaStreamSynchronize(streams_[d]);
      if (send_[d] != nullptr) (void)cudaFree(send_[d]);
      if (recv_[d] != nullptr) (void)cudaFree(recv_[d]);
      if (streams_[d] != nullptr) (void)cudaStreamDestroy(streams_[d]);
      if (comms_[d] != nullptr) (void)ncclCommDestroy(comms_[d]);
    }
  }

  /// Queues one hop: every (src, dst) pair sends `bytes` at once.
  void hop(const std::vector<std::pair<int, int>>& pairs, int64_t bytes) {
    nccl_check(ncclGroupStart(), "ncclGroupStart");
    for (const auto& [src, dst] : pairs) {
      const auto s = static_cast<size_t>(src);
      const auto r = static_cast<size_t>(dst);
      nccl_check(ncclSend(send_[s], static_cast<size_t>(bytes), ncclChar, dst, comms_[s], streams_[s]), "ncclSend");
      nccl_check(ncclRecv(recv_[r], static_cast<size_t>(bytes), ncclChar, src, comms_[r], streams_[r]), "ncclRecv");
    }
    nccl_check(ncclGroupEnd(), "ncclGroupEnd");
  }

  void synchronize() {
    for (size_t d = 0; d < devices_.size(); ++d) {
      SPARSERING_CUDA_CHECK(cudaSetDevice(devices_[d]));
      SPARSERING_CUDA_CHECK(cudaStreamSynchronize(streams_[d]));
    }
  }

 private:
  std::vector<int> devices_;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  std::vector<void*> send_;
  std::vector<void*> recv_;
};

struct Pattern {
  std::string mode;
  int32_t gpus = 0;
  int32_t ring_size = 0;
  std::vector<std::pair<int, int>> pairs;
};

std::vector<Pattern> patterns(int n) {
  std::vector<Pattern> list{{"send", 2, 2, {{0, 1}}}, {"recv", 2, 2, {{1, 0}}}, {"both", 2, 2, {{0, 1}, {1, 0}}}};
  for (int size = 2; size <= n; ++size) {
    if (n % size != 0) continue;
    Pattern ring{"ring", n, size, {}};
    for (int base = 0; base < n; base += size) {
      for (int m = 0; m < size; ++m) ring.pairs.push_back({base + m, base + (m + 1) % size});
    }
    list.push_back(std::move(ring));
  }
  return list;
}

}  // namespace

std::string nccl_version_string() {
  int version = 0;
  nccl_check(ncclGetVersion(&version), "ncclGetVersion");
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  return str(version / 10000, ".", (version % 10000) / 100, ".", version % 100);
}

std::vector<HopMeasurement> run_hop_benchmarks(const HopBenchOptions& options,
                                               const std::function<void(const std::string&)>& progress) {
  require(options.devices.size() >= 2, "the hop benchmark needs at least 2 GPUs, got ", options.devices.size());
  require(!options.sizes_bytes.empty(), "the hop benchmark needs at least one message size");
  require(options.repeats >= 1 && options.warmup >= 0, "hop benchmark needs repeats >= 1 and warmup >= 0");
  const int64_t max_bytes = *std::max_element(options.sizes_bytes.begin(), options.sizes_bytes.end());
  HopWorld world(options.devices, max_bytes);
  std::vector<HopMeasurement> results;
  for (const Pattern& pattern : patterns(static_cast<int>(options.devices.size()))) {
    for (const int64_t bytes : options.sizes_bytes) {
      require(bytes >= 1, "hop message size must be >= 1 byte, got ", bytes);
      const int iterations = static_cast<int>(std::clamp<int64_t>(options.bytes_per_repeat / bytes, 2, 50));
      for (int k = 0; k < options.warmup; ++k) world.hop(pattern.pairs, bytes);
      world.synchronize();
      std::vector<double> times;
      for (int r = 0; r < options.repeats; ++r) {
        const auto start = std::chrono::steady_clock::now();
        for (int k = 0; k < iterations; ++k) world.hop(pattern.pairs, bytes);
        world.synchronize();
        const std::chrono::duration<double, std::micro> elapsed = std::chrono::steady_clock::now() - start;
        times.push_back(elapsed.count() / iterations);
      }
      HopMeasurement m;
      m.mode = pattern.mode;
      m.gpus = pattern.gpus;
      m.ring_size = pattern.ring_size;
      m.bytes = bytes;
      m.repeats = options.repeats;
      m.iterations = iterations;
      m.min_us = *std::min_element(times.begin(), times.end());
      m.median_us = median(std::move(times));
      m.gbytes_per_s = static_cast<double>(bytes) / m.median_us * 1e-3;
      results.push_back(m);
    }
    if (progress) {
      std::ostringstream line;
      line.precision(4);
      line << "hops " << pattern.mode << (pattern.mode == "ring" ? str(" of ", pattern.ring_size, " x ", pattern.gpus / pattern.ring_size) : "")
           << ": " << results.back().gbytes_per_s << " GB/s at " << results.back().bytes << " bytes";
      progress(line.str());
    }
  }
  return results;
}

}  // namespace sparsering
