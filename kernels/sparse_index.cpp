#include "kernels/sparse_index.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "kernels/attention_params.hpp"

namespace sparsering {

int64_t SparseIndex::column_chunks() const {
  int64_t chunks = 0;
  for (size_t list = 0; list + 1 < column_offsets.size(); ++list) {
    const int64_t columns = int64_t{column_offsets[list + 1]} - column_offsets[list];
    chunks += (columns + block_k - 1) / block_k;
  }
  return chunks;
}

namespace {

// Checks one CSR array pair: offsets has lists + 1 entries from 0 to values.size(), non-decreasing,
// and the values of each list ascend strictly inside [0, limit).
void check_lists(const std::vector<int32_t>& offsets, const std::vector<int32_t>& values, int64_t lists,
                 int64_t limit, const char* offsets_name, const char* values_name) {
  require(static_cast<int64_t>(offsets.size()) == lists + 1, offsets_name, " has ", offsets.size(),
          " entries, expected rows x q_blocks + 1 = ", lists + 1);
  require(offsets.front() == 0, offsets_name, "[0] = ", offsets.front(), ", expected 0");
  require(static_cast<size_t>(offsets.back()) == values.size(), offsets_name, "[", lists, "] = ", offsets.back(),
          " but ", values_name, " has ", values.size(), " entries");
  // All offsets first: with them non-decreasing from 0 to values.size(), every read below is in bounds.
  for (int64_t list = 0; list < lists; ++list) {
    const int32_t begin = offsets[static_cast<size_t>(list)];
    const int32_t end = offsets[static_cast<size_t>(list) + 1];
    require(begin <= end, offsets_name, " decreases at list ", list, " (", begin, " > ", end, ")");
  }
  for (int64_t list = 0; list < lists; ++list) {
    const int32_t begin = offsets[static_cast<size_t>(list)];
    const int32_t end = offsets[static_cast<size_t>(list) + 1];
    for (int32_t n = begin; n < end; ++n) {
      const int32_t value = values[static_cast<size_t>(n)];
      require(value >= 0 && value < limit, values_name, "[", n, "] = ", value, " (list ", list,
              ") is outside [0, ", limit, ")");
      require(n == begin || values[static_cast<size_t>(n) - 1] < value, values_name, "[", n, "] = ", value,
              " (list ", list, ") does not ascend strictly");
    }
  }
}

}  // namespace

void validate_sparse_index(const SparseIndex& index) {
  require(index.rows >= 0, "index rows = ", index.rows, " is negative");
  require(index.q_len >= 0 && index.kv_len >= 0, "index lengths must be >= 0, got q_len ", index.q_len,
          " and kv_len ", index.kv_len);
  require(index.block_q >= 1 && index.block_k >= 1, "index block sizes must be >= 1, got block_q ", index.block_q,
          " and block_k ", index.block_k);
  require(int64_t{index.q_blocks} == (index.q_len + index.block_q - 1) / index.block_q, "index q_blocks = ",
          index.q_blocks, " but ceil(q_len / block_q) = ", (index.q_len + index.block_q - 1) / index.block_q);
  const int64_t lists = int64_t{index.rows} * index.q_blocks;
  const int64_t kv_blocks = (index.kv_len + index.block_k - 1) / index.block_k;
  check_lists(index.tile_offsets, index.tile_block, lists, kv_blocks, "tile_offsets", "tile_block");
  require(index.tile_masked.size() == index.tile_block.size(), "tile_masked has ", index.tile_masked.size(),
          " entries but tile_block has ", index.tile_block.size());
  for (size_t n = 0; n < index.tile_masked.size(); ++n) {
    require(index.tile_masked[n] <= 1, "tile_masked[", n, "] = ", int{index.tile_masked[n]}, " is not 0 or 1");
  }
  check_lists(index.column_offsets, index.column_index, lists, index.kv_len, "column_offsets", "column_index");
}

SparseIndexView host_view(const SparseIndex& index) {
  SparseIndexView view;
  view.rows = index.rows;
  view.block_q = index.block_q;
  view.block_k = index.block_k;
  view.q_blocks = index.q_blocks;
  view.tile_offsets = index.tile_offsets.data();
  view.tile_block = index.tile_block.data();
  view.tile_masked = index.tile_masked.data();
  view.column_offsets = index.column_offsets.data();
  view.column_index = index.column_index.data();
  view.max_tiles = std::max<int64_t>(1, static_cast<int64_t>(index.tile_block.size()));
  return view;
}

}  // namespace sparsering
