// token_permutation.npy, the file every framework export writes for its data loader: row r holds
// the global token index of each local token of context-parallel rank r, in local order (from the
// one token-layout module, core/token_layout.hpp). A token keeps its global index as its
// position id, so the same rows are the position ids. Tested in tests/tuner/npy_file_test.cpp.
#pragma once

#include <string_view>

#include "core/token_layout.hpp"
#include "tuner/export/export_bundle.hpp"
#include "tuner/export/npy_file.hpp"

namespace sparsering {

/// The permutation of `layout` as a [ranks, local_len] matrix (layout_permutation reshaped).
Int64Matrix token_permutation_matrix(const TokenLayout& layout);

/// Adds token_permutation.npy for `layout` and a note saying what its rows are; `row_meaning`
/// names the rank numbering of the rows (e.g. "Megatron context-parallel rank").
void add_token_permutation(ExportBundle& bundle, const TokenLayout& layout, std::string_view row_meaning);

}  // namespace sparsering
