#include "measure/calibration/csv_rows.hpp"

#include <cmath>

#include "common/error.hpp"

namespace sparsering {
namespace {

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

}  // namespace

CsvRows::CsvRows(const std::string& text, std::string_view source_name, std::span<const char* const> required)
    : in_(text), source_(source_name) {
  std::string line;
  require(static_cast<bool>(std::getline(in_, line)), source_, ": empty file, expected a header row");
  const std::vector<std::string> header = split_csv_line(line);
  header_size_ = header.size();
  for (size_t k = 0; k < header.size(); ++k) column_[header[k]] = k;
  for (const char* name : required) require(column_.count(name) == 1, source_, ": no column \"", name, "\" in the header");
}

bool CsvRows::next() {
  std::string line;
  while (std::getline(in_, line)) {
    ++line_number_;
    if (line.empty()) continue;
    cells_ = split_csv_line(line);
    require(cells_.size() >= header_size_, where(), ": ", cells_.size(), " cells, the header has ", header_size_);
    return true;
  }
  return false;
}

std::string CsvRows::where() const { return str(source_, ":", line_number_); }

namespace {

/// `parse(text, &used)` (std::stoll, std::stod) when it reads the whole of `text`, else `failed`.
template <class T, class Parse>
T parse_whole(const std::string& text, Parse parse, T failed) {
  size_t used = 0;
  try {
    const T value = parse(text, &used);
    return used > 0 && used == text.size() ? value : failed;
  } catch (const std::exception&) {
    return failed;
  }
}

}  // namespace

int64_t CsvRows::integer(const char* column, int64_t most) const {
  const std::string& text = cell(column);
  const auto stoll = [](const std::string& t, size_t* used) { return std::stoll(t, used); };
  const auto value = parse_whole<int64_t>(text, stoll, -1);
  require(value >= 0 && value <= most, where(), ": column ", column, " must be an integer >= 0",
          most == INT64_MAX ? std::string() : str(" and <= ", most), ", got \"", text.substr(0, 32), "\"");
  return value;
}

double CsvRows::number(const char* column) const {
  const std::string& text = cell(column);
  const auto stod = [](const std::string& t, size_t* used) { return std::stod(t, used); };
  const auto value = parse_whole<double>(text, stod, -1.0);
  require(std::isfinite(value) && value >= 0.0, where(), ": column ", column, " must be a finite number >= 0, got \"",
          text.substr(0, 32), "\"");
  return value;
}

}  // namespace sparsering
