#include "tuner/export/token_permutation_file.hpp"

#include "common/error.hpp"

namespace sparsering {

Int64Matrix token_permutation_matrix(const TokenLayout& layout) {
  Int64Matrix matrix;
  matrix.rows = layout.ranks();
  matrix.cols = layout.local_len();
  matrix.values = layout_permutation(layout);
  return matrix;
}

void add_token_permutation(ExportBundle& bundle, const TokenLayout& layout, std::string_view row_meaning) {
  bundle.add_file("token_permutation.npy", write_npy_int64(token_permutation_matrix(layout)));
  std::string kind(to_string(layout.kind()));
  if (layout.kind() == LayoutKind::striped) kind += str(" (granularity ", layout.granularity_tokens(), " tokens)");
  bundle.notes.push_back(str("token_permutation.npy: int64 array [", layout.ranks(), ", ", layout.local_len(),
                             "], the ", kind, " layout over ", layout.ranks(), " ranks; row r lists the global token ",
                             "indices that ", row_meaning, " r holds, in local order (numpy.load; tokens[row r]). ",
                             "Position ids are the same values: a token keeps its global position"));
}

}  // namespace sparsering
