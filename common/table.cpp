#include "common/table.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "common/error.hpp"
#include "common/text_safety.hpp"

namespace sparsering {
namespace {

bool looks_numeric(const std::string& cell) {
  if (cell.empty()) return false;
  const char first = cell.front();
  return std::isdigit(static_cast<unsigned char>(first)) || ((first == '-' || first == '+' || first == '.') && cell.size() > 1);
}

/// Columns a cell takes on a terminal: one per code point (cells are escaped, so valid UTF-8).
size_t display_width(const std::string& cell) {
  size_t width = 0;
  for (const char c : cell) width += (static_cast<unsigned char>(c) & 0xC0u) != 0x80u ? 1 : 0;
  return width;
}

std::vector<std::string> escaped(const std::vector<std::string>& row) {
  std::vector<std::string> out;
  out.reserve(row.size());
  for (const std::string& cell : row) out.push_back(escape_for_terminal(cell));
  return out;
}

}  // namespace

Table::Table(std::vector<std::string> header) : header_(std::move(header)) {}

void Table::add_row(std::vector<std::string> cells) {
  if (cells.size() != header_.size()) {
    throw std::logic_error(str("table row has ", cells.size(), " cells, header has ", header_.size()));
  }
  rows_.push_back(std::move(cells));
}

void Table::print(std::ostream& out) const {
  // Cells may hold names from user files: escape control characters and invalid bytes so a cell
  // can neither drive the terminal nor break the columns.
  const std::vector<std::string> header = escaped(header_);
  std::vector<std::vector<std::string>> rows;
  rows.reserve(rows_.size());
  for (const auto& row : rows_) rows.push_back(escaped(row));
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = display_width(header[c]);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], display_width(row[c]));
  }
  auto print_row = [&](const std::vector<std::string>& row, bool is_header) {
    for (size_t c = 0; c < row.size(); ++c) {
      if (c > 0) out << "  ";
      const bool right = !is_header && looks_numeric(row[c]);
      const std::string pad(width[c] - display_width(row[c]), ' ');
      out << (right ? pad + row[c] : row[c] + pad);
    }
    out << '\n';
  };
  print_row(header, true);
  for (size_t c = 0; c < header.size(); ++c) {
    if (c > 0) out << "  ";
    out << std::string(width[c], '-');
  }
  out << '\n';
  for (const auto& row : rows) print_row(row, false);
}

std::string fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

}  // namespace sparsering
