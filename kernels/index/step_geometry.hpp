// Block geometry of one (query rank, K/V rank) pair at one ring step: where each local query
// block and the held keys sit in the global sequence. Every rule the index builder needs about
// token layouts is derived here from TokenLayout::global_token alone, using one property all
// layouts share (tested): a rank's global positions increase with its local index. So a local
// range is a union of runs of consecutive global positions (one run for contiguous, at most two
// for zigzag, about range/G + 1 for striped), the smallest and largest global position of a block
// are those of its first and last token, and the keys whose global positions lie in an interval
// form one local range. Tested in tests/kernels/step_geometry_test.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/attention_params.hpp"

namespace sparsering {

/// What an index is built for: the ring position (layout, query rank, K/V rank) and the tiles.
/// The query and key lengths are the layout's local length N/W.
struct IndexGeometry {
  RingPosition position;
  int32_t block_q = 64;  ///< query block size (tokens)
  int32_t block_k = 64;  ///< key tile size (tokens)
};

/// A closed interval [lo, hi] of consecutive global token positions, held at consecutive local
/// positions starting at `local_lo`.
struct GlobalRun {
  int64_t lo = 0;
  int64_t hi = 0;
  int64_t local_lo = 0;
};

/// The block geometry of one ring step, precomputed once and shared by every row's index.
class StepGeometry {
 public:
  /// Checks the geometry (valid layout, ranks in [0, W), block sizes >= 1, N/W < 2^31) and
  /// precomputes the global runs of every query block and of the held keys. Throws InputError
  /// naming the bad value.
  explicit StepGeometry(const IndexGeometry& geometry);

  /// The settings this geometry was built from.
  const IndexGeometry& geometry() const { return geometry_; }
  /// The token layout of the ring.
  const TokenLayout& layout() const { return geometry_.position.layout; }
  /// Local query tokens / held key tokens (both N/W).
  int64_t q_len() const { return len_; }
  int64_t kv_len() const { return len_; }
  /// Query block / key tile size (tokens).
  int32_t block_q() const { return geometry_.block_q; }
  int32_t block_k() const { return geometry_.block_k; }
  /// ceil(q_len / block_q) and ceil(kv_len / block_k).
  int32_t q_blocks() const { return q_blocks_; }
  int32_t kv_blocks() const { return kv_blocks_; }

  /// Global runs of local query block `q_block`, ascending.
  std::span<const GlobalRun> query_runs(int32_t q_block) const;
  /// Smallest / largest global position of a query in local query block `q_block`.
  int64_t query_global_min(int32_t q_block) const { return query_runs(q_block).front().lo; }
  int64_t query_global_max(int32_t q_block) const { return query_runs(q_block).back().hi; }

  /// Global runs of all held keys, ascending (local_lo ascending too).
  std::span<const GlobalRun> key_runs() const { return key_runs_; }
  /// Number of held keys whose global position is < `global` (any integer `global`).
  /// O(log(key runs)).
  int64_t keys_below(int64_t global) const;
  /// Global position of the first / last held key.
  int64_t key_global_first() const { return key_runs_.front().lo; }
  int64_t key_global_last() const { return key_runs_.back().hi; }

  /// First key block whose tiles with query block `q_block` contain a non-causal pair (some key
  /// later than some query): every key block j >= this is `masked`, every j < this is not.
  /// kv_blocks() when no tile of the row is masked.
  int32_t first_masked_key_block(int32_t q_block) const {
    return first_masked_[static_cast<size_t>(q_block)];
  }
  /// Local keys < this are seen (causally) by at least one query of block `q_block`; keys at or
  /// above it by none.
  int64_t visible_key_limit(int32_t q_block) const { return visible_limit_[static_cast<size_t>(q_block)]; }

 private:
  IndexGeometry geometry_;
  int64_t len_ = 0;
  int32_t q_blocks_ = 0;
  int32_t kv_blocks_ = 0;
  std::vector<int32_t> run_offsets_;    // (q_blocks + 1) CSR into query_runs_
  std::vector<GlobalRun> query_runs_;
  std::vector<GlobalRun> key_runs_;
  std::vector<int64_t> key_run_starts_; // key_runs_[n].lo, for binary search
  std::vector<int32_t> first_masked_;   // (q_blocks)
  std::vector<int64_t> visible_limit_;  // (q_blocks)
};

}  // namespace sparsering
