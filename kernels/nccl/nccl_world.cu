#include "kernels/nccl/nccl_world.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "common/error.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/nccl/nccl_check.hpp"
#include "kernels/ring/ring_error.hpp"

namespace sparsering {

void throw_nccl_error(ncclResult_t code, const char* expression, const char* file, int line) {
  int device = -1;
  (void)cudaGetDevice(&device);
  throw RingError(str(expression, " failed: ", ncclGetErrorString(code), " (", static_cast<int>(code), ") at ", file,
                      ":", line, " on device ", device));
}

namespace {

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

}  // namespace

NcclWorld::NcclWorld(const NcclWorldConfig& config) : config_(config) {
  require(config.ranks >= 1 && config.rank >= 0 && config.rank < config.ranks, "NCCL rank ", config.rank,
          " is not in a world of ", config.ranks);
  require(config.timeout_s > 0.0, "timeout must be > 0 s, got ", config.timeout_s);
  SPARSERING_CUDA_CHECK(cudaSetDevice(config.device));
  ncclConfig_t nccl_config = nonblocking_config();
  ncclComm_t comm = nullptr;
  const ncclResult_t result = ncclCommInitRankConfig(&comm, config.ranks, config.id, config.rank, &nccl_config);
  if (result != ncclSuccess && result != ncclInProgress) {
    if (comm != nullptr) (void)ncclCommAbort(comm);
    throw_nccl_error(result, "ncclCommInitRankConfig", __FILE__, __LINE__);
  }
  comms_.push_back(comm);
  wait_comm(comm, "communicator initialisation (all ranks must join)");
}

NcclWorld::~NcclWorld() {
  (void)cudaSetDevice(config_.device);
  if (aborted_) return;
  bool healthy = true;
  for (ncclComm_t comm : comms_) {
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess || state != ncclSuccess) healthy = false;
  }
  if (!healthy) {
    abort_all();
    return;
  }
  // Finalize may need the peers; if they are gone, give up after the timeout and abort.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(config_.timeout_s);
  for (ncclComm_t comm : comms_) (void)ncclCommFinalize(comm);
  for (ncclComm_t comm : comms_) {
    ncclResult_t state = ncclInProgress;
    while (ncclCommGetAsyncError(comm, &state) == ncclSuccess && state == ncclInProgress &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (state != ncclSuccess) {
      abort_all();
      return;
    }
  }
  for (ncclComm_t comm : comms_) (void)ncclCommDestroy(comm);
  comms_.clear();
}

ncclComm_t NcclWorld::duplicate() {
  ncclConfig_t nccl_config = nonblocking_config();
  ncclComm_t copy = nullptr;
  SPARSERING_NCCL_CHECK(ncclCommSplit(comm(), 0, config_.rank, &copy, &nccl_config));
  wait_comm(comm(), "communicator split");
  if (copy == nullptr) fail("communicator split", "NCCL returned no communicator");
  comms_.push_back(copy);
  wait_comm(copy, "communicator split (all ranks must join)");
  return copy;
}

template <typename Ready>
void NcclWorld::poll(Ready ready, const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(config_.timeout_s);
  for (int64_t spin = 0;; ++spin) {
    if (ready()) return;
    for (ncclComm_t comm : comms_) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t query = ncclCommGetAsyncError(comm, &state);
      if (query != ncclSuccess) fail(what, str("ncclCommGetAsyncError failed: ", ncclGetErrorString(query)));
      if (state != ncclSuccess && state != ncclInProgress) {
        fail(what, str("NCCL reported ", ncclGetErrorString(state), " (a peer died or the network failed)"));
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      fail(what, str("no progress within the timeout of ", config_.timeout_s, " s (a peer died or stalled)"));
    }
    if (spin > 64) std::this_thread::sleep_for(std::chrono::microseconds(spin > 4096 ? 500 : 20));
  }
}

void NcclWorld::wait_comm(ncclComm_t comm, const std::string& what) {
  poll(
      [&] {
        ncclResult_t state = ncclSuccess;
        if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return false;
        return state == ncclSuccess;
      },
      what);
}

void NcclWorld::wait_event(cudaEvent_t event, const std::string& what) {
  poll(
      [&] {
        const cudaError_t status = cudaEventQuery(event);
        if (status == cudaSuccess) return true;
        if (status != cudaErrorNotReady) SPARSERING_CUDA_CHECK(status);
        return false;
      },
      what);
}

void NcclWorld::wait_stream(cudaStream_t stream, const std::string& what) {
  poll(
      [&] {
        const cudaError_t status = cudaStreamQuery(stream);
        if (status == cudaSuccess) return true;
        if (status != cudaErrorNotReady) SPARSERING_CUDA_CHECK(status);
        return false;
      },
      what);
}

void NcclWorld::abort_all() noexcept {
  for (ncclComm_t comm : comms_) (void)ncclCommAbort(comm);
  comms_.clear();
  aborted_ = true;
}

void NcclWorld::fail(const std::string& what, const std::string& reason) {
  abort_all();
  throw RingError(str("rank ", config_.rank, " (device ", config_.device, "): ", phase_, ": waiting for ", what, ": ",
                      reason, "; aborted its NCCL communicators"));
}

ncclUniqueId NcclWorld::new_id() {
  ncclUniqueId id;
  SPARSERING_NCCL_CHECK(ncclGetUniqueId(&id));
  return id;
}

void NcclWorld::write_id_file(const std::filesystem::path& path, const ncclUniqueId& id) {
  const std::filesystem::path temp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(id.internal, sizeof id.internal);
    if (!out) throw RingError(str("cannot write the NCCL id file ", temp));
  }
  std::error_code error;
  std::filesystem::rename(temp, path, error);
  if (error) throw RingError(str("cannot rename ", temp, " to ", path, ": ", error.message()));
}

ncclUniqueId NcclWorld::read_id_file(const std::filesystem::path& path, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw RingError(str("the NCCL id file ", path, " did not appear within ", timeout_s, " s"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ncclUniqueId id;
  std::ifstream in(path, std::ios::binary);
  in.read(id.internal, sizeof id.internal);
  if (in.gcount() != static_cast<std::streamsize>(sizeof id.internal)) {
    throw RingError(str("the NCCL id file ", path, " holds ", in.gcount(), " bytes, expected ", sizeof id.internal));
  }
  return id;
}

}  // namespace sparsering
