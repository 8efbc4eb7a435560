// The index builder: kept vertical-slash pattern + token layout + ring position -> SparseIndex,
// exactly per the contract in kernels/sparse_index.hpp, for every layout, granularity, ring step,
// block shape and partial last block. Also the CPU reference of the CUDA index build and the
// ground truth of the simulator's work counting (count_sparse_index.hpp counts the same lists
// without materialising them). Tested against brute-force enumeration
// (kernels/reference/brute_force_mask.hpp) in tests/kernels/build_sparse_index_test.cpp.
//
// Cost: O(rows x q_blocks x runs x relevant slash intervals x log(kv_len) + output size); never
// O(q_len x kv_len).
#pragma once

#include <span>

#include "kernels/index/step_geometry.hpp"
#include "kernels/index/row_pattern.hpp"
#include "kernels/sparse_index.hpp"

namespace sparsering {

/// Builds the index of one ring step for `rows` (row r = batch b * query heads + head h).
/// Throws InputError when the index would not fit its 32-bit offsets.
SparseIndex build_sparse_index(const StepGeometry& geometry, std::span<const PreparedRowPattern> rows);

/// Same, from the geometry settings and raw kept sets (validated; see prepare_row_pattern).
SparseIndex build_sparse_index(const IndexGeometry& geometry, std::span<const RowPattern> rows);

}  // namespace sparsering
