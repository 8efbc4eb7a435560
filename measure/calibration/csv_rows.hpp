// Reading the calibration's CSV files (a benchmark run's kernel measurements, a replay's
// cells.csv) row by row: columns are found by header name, so files with more columns (written by
// later versions) still read, and every value goes through std::stoll / std::stod with the whole
// cell consumed. Every error names the file, the line and the column. Tested through
// tests/measure/calibration/kernel_calibration_test.cpp and replayed_cells_test.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace sparsering {

class CsvRows {
 public:
  /// Reads the header of `text`. Throws InputError naming `source_name` for an empty text or a
  /// `required` column the header lacks.
  CsvRows(const std::string& text, std::string_view source_name, std::span<const char* const> required);

  /// Moves to the next non-empty row; false at the end. Throws InputError for a row with fewer
  /// cells than the header.
  bool next();

  /// The file's line number of the current row (the header is line 1).
  int64_t line_number() const { return line_number_; }
  bool has(const char* column) const { return column_.count(column) == 1; }
  /// The current row's cell in `column` (a required or has() column).
  const std::string& cell(const char* column) const { return cells_[column_.at(column)]; }
  /// The cell as an integer in [0, most]; InputError otherwise.
  int64_t integer(const char* column, int64_t most = INT64_MAX) const;
  /// The cell as a finite number >= 0; InputError otherwise.
  double number(const char* column) const;
  /// "<source>:<line>" for messages about the current row.
  std::string where() const;

 private:
  std::istringstream in_;
  std::string source_;
  std::map<std::string, size_t> column_;
  size_t header_size_ = 0;
  std::vector<std::string> cells_;
  int64_t line_number_ = 1;
};

}  // namespace sparsering
