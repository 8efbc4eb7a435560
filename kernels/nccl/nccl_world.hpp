// One rank's NCCL world: a non-blocking communicator over the ring's W global ranks (plus
// duplicates, one per concurrent traffic class), the NCCL id shared between the threads of one
// process or through a file between processes, and bounded waits: every wait polls
// cudaEventQuery and ncclCommGetAsyncError against a deadline; on timeout or asynchronous error
// the rank aborts all its communicators and throws RingError naming the rank, the current phase
// (pass and ring step) and what it waited for. So a dead or stalled peer ends every rank within
// the timeout instead of hanging. Tested in tests/nccl/nccl_world_test.cpp (a SIGKILLed peer).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace sparsering {

struct NcclWorldConfig {
  int32_t rank = 0;          ///< this global rank
  int32_t ranks = 1;         ///< world size
  int32_t device = 0;        ///< CUDA device this rank drives
  ncclUniqueId id{};         ///< shared by all ranks
  double timeout_s = 60.0;   ///< bound on every wait (> 0)
};

class NcclWorld {
 public:
  /// Selects the device and creates the communicator (non-blocking), waiting for it within the
  /// timeout. Throws RingError on failure or timeout.
  explicit NcclWorld(const NcclWorldConfig& config);
  NcclWorld(const NcclWorld&) = delete;
  NcclWorld& operator=(const NcclWorld&) = delete;
  /// Destroys healthy communicators (finalize + destroy), aborts failed ones. Never throws.
  ~NcclWorld();

  int32_t rank() const { return config_.rank; }
  int32_t ranks() const { return config_.ranks; }
  int32_t device() const { return config_.device; }
  /// The world communicator.
  ncclComm_t comm() const { return comms_.front(); }
  /// A new communicator over the same ranks with the same rank numbers (ncclCommSplit, one
  /// colour), so traffic on it never queues behind traffic on the others. Collective: every rank
  /// must call it in the same order. Owned by the world.
  ncclComm_t duplicate();

  /// Names what the rank is doing, for error messages (e.g. "forward ring step 3").
  void set_phase(std::string phase) { phase_ = std::move(phase); }
  const std::string& phase() const { return phase_; }

  /// Waits until `comm` has accepted the calls queued on it (non-blocking mode).
  void wait_comm(ncclComm_t comm, const std::string& what);
  /// Waits until `event` completed (bounded, checking every communicator for errors).
  void wait_event(cudaEvent_t event, const std::string& what);
  /// Waits until all work on `stream` completed (bounded).
  void wait_stream(cudaStream_t stream, const std::string& what);
  /// Aborts every communicator and throws RingError("rank R (device D): PHASE: WHAT: REASON").
  [[noreturn]] void fail(const std::string& what, const std::string& reason);

  /// A fresh NCCL id (ncclGetUniqueId).
  static ncclUniqueId new_id();
  /// Writes `id` to `path` atomically (temporary file + rename). Throws RingError on failure.
  static void write_id_file(const std::filesystem::path& path, const ncclUniqueId& id);
  /// Reads the id from `path`, waiting up to `timeout_s` for the file to appear. Throws
  /// RingError on timeout or a file of the wrong size.
  static ncclUniqueId read_id_file(const std::filesystem::path& path, double timeout_s);

 private:
  template <typename Ready>
  void poll(Ready ready, const std::string& what);
  void abort_all() noexcept;

  NcclWorldConfig config_;
  std::vector<ncclComm_t> comms_;
  std::string phase_ = "setup";
  bool aborted_ = false;
};

}  // namespace sparsering
