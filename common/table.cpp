#include "common/table.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iomanip>

#include "common/error.hpp"

namespace sparsering {
namespace {

bool looks_numeric(const std::string& cell) {
  if (cell.empty()) return false;
  const char first = cell.front();
  return std::isdigit(static_cast<unsigned char>(first)) || ((first == '-' || first == '+' || first == '.') && cell.size() > 1);
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
  std::vector<size_t> width(header_.size());
  for (size_t c = 0; c < header_.size(); ++c) width[c] = header_[c].size();
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  auto print_row = [&](const std::vector<std::string>& row, bool is_header) {
    for (size_t c = 0; c < row.size(); ++c) {
      if (c > 0) out << "  ";
      const bool right = !is_header && looks_numeric(row[c]);
      out << (right ? std::right : std::left) << std::setw(static_cast<int>(width[c])) << row[c];
    }
    out << std::left << '\n';
  };
  print_row(header_, true);
  for (size_t c = 0; c < header_.size(); ++c) {
    if (c > 0) out << "  ";
    out << std::string(width[c], '-');
  }
  out << '\n';
  for (const auto& row : rows_) print_row(row, false);
}

std::string fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

}  // namespace sparsering
