// A minimal NumPy .npy (format 1.0) writer and reader for 2-D little-endian int64 arrays: the
// token permutation files of the exports, readable with numpy.load. The reader exists for tests
// and rejects anything else. Tested in tests/tuner/npy_file_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sparsering {

/// A row-major 2-D int64 array.
struct Int64Matrix {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<int64_t> values;  ///< rows x cols, row-major
};

/// The bytes of an .npy file holding `matrix` ('<i8', C order, shape (rows, cols)).
/// Precondition: values.size() == rows x cols.
std::string write_npy_int64(const Int64Matrix& matrix);

/// Parses the bytes of an .npy file written by write_npy_int64 (2-D '<i8', C order). Throws
/// InputError naming what is wrong for any other content, a short file or a size mismatch.
Int64Matrix read_npy_int64(std::string_view bytes);

}  // namespace sparsering
