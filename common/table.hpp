// A plain-text table for the CLI's human output: columns sized to their widest cell, numbers
// right-aligned. Cells are printed through escape_for_terminal (common/text_safety.hpp).
// Tested in tests/common/table_test.cpp.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace sparsering {

class Table {
 public:
  explicit Table(std::vector<std::string> header);
  /// Adds a row; it must have as many cells as the header.
  void add_row(std::vector<std::string> cells);
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

/// Formats `value` with `digits` digits after the point.
std::string fixed(double value, int digits);

}  // namespace sparsering
