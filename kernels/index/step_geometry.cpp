#include "kernels/index/step_geometry.hpp"

#include <algorithm>
#include <limits>

#include "common/error.hpp"

namespace sparsering {
namespace {

// Appends the runs of local positions [begin, end) of `rank`. A run starting at x ends at the
// largest y with global(y) - global(x) == y - x (global positions strictly increase, so the
// equality holds exactly on the run); found by galloping then bisecting, O(log run length).
void append_runs(const TokenLayout& layout, int32_t rank, int64_t begin, int64_t end, std::vector<GlobalRun>& runs) {
  for (int64_t x = begin; x < end;) {
    const int64_t gx = layout.global_token(rank, x);
    auto same_run = [&](int64_t y) { return layout.global_token(rank, y) - gx == y - x; };
    int64_t good = x;  // same_run(good) holds
    int64_t step = 1;
    while (good + step < end && same_run(good + step)) {
      good += step;
      step *= 2;
    }
    int64_t bad = std::min(good + step, end);  // same_run(bad) fails, or bad == end
    while (bad - good > 1) {
      const int64_t mid = good + (bad - good) / 2;
      if (same_run(mid)) good = mid; else bad = mid;
    }
    runs.push_back({gx, gx + (good - x), x});
    x = good + 1;
  }
}

}  // namespace

StepGeometry::StepGeometry(const IndexGeometry& geometry) : geometry_(geometry) {
  const TokenLayout& layout = geometry.position.layout;
  const int32_t q_rank = geometry.position.q_rank;
  const int32_t kv_rank = geometry.position.kv_rank;
  require(q_rank >= 0 && q_rank < layout.ranks(), "query rank ", q_rank, " is outside [0, ", layout.ranks(), ")");
  require(kv_rank >= 0 && kv_rank < layout.ranks(), "K/V rank ", kv_rank, " is outside [0, ", layout.ranks(), ")");
  require(geometry.block_q >= 1, "block_q must be >= 1 token, got ", geometry.block_q);
  require(geometry.block_k >= 1, "block_k must be >= 1 token, got ", geometry.block_k);
  len_ = layout.local_len();
  require(len_ <= std::numeric_limits<int32_t>::max(), "local length ", len_,
          " tokens does not fit the index's 32-bit positions");
  q_blocks_ = static_cast<int32_t>((len_ + geometry.block_q - 1) / geometry.block_q);
  kv_blocks_ = static_cast<int32_t>((len_ + geometry.block_k - 1) / geometry.block_k);

  append_runs(layout, kv_rank, 0, len_, key_runs_);
  key_run_starts_.reserve(key_runs_.size());
  for (const GlobalRun& run : key_runs_) key_run_starts_.push_back(run.lo);

  run_offsets_.reserve(static_cast<size_t>(q_blocks_) + 1);
  run_offsets_.push_back(0);
  first_masked_.resize(static_cast<size_t>(q_blocks_));
  visible_limit_.resize(static_cast<size_t>(q_blocks_));
  for (int32_t i = 0; i < q_blocks_; ++i) {
    const int64_t lo = int64_t{i} * geometry.block_q;
    append_runs(layout, q_rank, lo, std::min(lo + geometry.block_q, len_), query_runs_);
    require(query_runs_.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), "too many query runs");
    run_offsets_.push_back(static_cast<int32_t>(query_runs_.size()));

    // A key block j holds a non-causal pair iff its last (largest) key is later than the block's
    // first (smallest) query, i.e. iff its last local key is >= the first key later than that.
    const int64_t first_later_key = keys_below(query_global_min(i) + 1);
    first_masked_[static_cast<size_t>(i)] =
        first_later_key < len_ ? static_cast<int32_t>(first_later_key / geometry.block_k) : kv_blocks_;
    visible_limit_[static_cast<size_t>(i)] = keys_below(query_global_max(i) + 1);
  }
}

std::span<const GlobalRun> StepGeometry::query_runs(int32_t q_block) const {
  const auto begin = static_cast<size_t>(run_offsets_[static_cast<size_t>(q_block)]);
  const auto end = static_cast<size_t>(run_offsets_[static_cast<size_t>(q_block) + 1]);
  return {query_runs_.data() + begin, end - begin};
}

int64_t StepGeometry::keys_below(int64_t global) const {
  // The last run starting before `global` holds or precedes global - 1.
  const auto after = std::lower_bound(key_run_starts_.begin(), key_run_starts_.end(), global);
  if (after == key_run_starts_.begin()) return 0;
  const GlobalRun& run = key_runs_[static_cast<size_t>(after - key_run_starts_.begin()) - 1];
  return run.local_lo + std::min(global, run.hi + 1) - run.lo;
}

}  // namespace sparsering
