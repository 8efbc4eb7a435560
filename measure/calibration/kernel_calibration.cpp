// The CSV reader looks columns up by header name, so files with extra columns (written by later
// versions) still read; numbers go through std::stod / std::stoll with the whole cell consumed.
#include "measure/calibration/kernel_calibration.hpp"

#include <cmath>
#include <map>
#include <sstream>

#include "common/error.hpp"
#include "measure/calibration/link_fit.hpp"

namespace sparsering {
namespace {

KernelCostCoefficients rounded(const KernelCostCoefficients& c) {
  return {round_significant(c.launch_us, 4), round_significant(c.per_tile_us, 4), round_significant(c.per_vertical_chunk_us, 4)};
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

}  // namespace

bool launch_under_filled(const KernelMeasurement& m, int64_t sm_count) {
  const int64_t slots = 4 * sm_count;  // two waves of two CTAs per SM
  if (m.direction == "forward") return m.lists < slots;
  const int64_t key_blocks = (m.local_tokens + 63) / 64;
  return int64_t{m.kv_heads} * key_blocks < slots;
}

DirectionFits fit_kernel_measurements(std::vector<KernelMeasurement>& kernels, const std::string& direction) {
  std::vector<KernelSample> filled;
  std::vector<KernelSample> under;
  for (const KernelMeasurement& k : kernels) {
    if (k.direction != direction) continue;
    (k.under_filled ? under : filled).push_back({k.tiles, k.column_chunks, k.median_us, k.lists});
  }
  DirectionFits fits;
  const KernelCostCoefficients c = rounded(fit_kernel_cost(filled).coefficients);
  fits.fit = evaluate_kernel_cost(c, filled);
  fits.under = evaluate_kernel_cost(c, under);
  const KernelFit with_lists = fit_kernel_cost(filled, true);
  const KernelCostCoefficients cl = rounded(with_lists.coefficients);
  const double per_list_us = round_significant(with_lists.per_list_us, 4);
  fits.list_fit = evaluate_kernel_cost(cl, filled, per_list_us);
  fits.list_under = evaluate_kernel_cost(cl, under, per_list_us);
  for (KernelMeasurement& k : kernels) {
    if (k.direction != direction) continue;
    k.predicted_us = predict_kernel_us(c, k.tiles, k.column_chunks);
    k.predicted_list_us = predict_kernel_us(cl, k.tiles, k.column_chunks, per_list_us, k.lists);
  }
  return fits;
}

std::vector<KernelMeasurement> parse_kernel_measurements_csv(const std::string& text, std::string_view source_name) {
  std::istringstream in(text);
  std::string line;
  require(static_cast<bool>(std::getline(in, line)), source_name, ": empty file, expected a header row");
  std::map<std::string, size_t> column;
  const std::vector<std::string> header = split_csv_line(line);
  for (size_t k = 0; k < header.size(); ++k) column[header[k]] = k;
  const char* required[] = {"direction", "q_heads", "kv_heads", "local_tokens", "block_q", "block_k", "head_dim",
                            "tiles_per_list", "chunks_per_list", "lists", "tiles", "column_chunks", "repeats",
                            "median_us", "min_us", "max_us", "under_filled"};
  for (const char* name : required) require(column.count(name) == 1, source_name, ": no column \"", name, "\" in the header");
  std::vector<KernelMeasurement> result;
  int64_t line_number = 1;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty()) continue;
    const std::vector<std::string> cells = split_csv_line(line);
    require(cells.size() >= header.size(), source_name, ":", line_number, ": ", cells.size(), " cells, the header has ",
            header.size());
    const auto cell = [&](const char* name) -> const std::string& { return cells[column.at(name)]; };
    const auto integer = [&](const char* name) {
      size_t used = 0;
      int64_t value = 0;
      try {
        value = std::stoll(cell(name), &used);
      } catch (const std::exception&) {
        used = 0;
      }
      require(used > 0 && used == cell(name).size() && value >= 0, source_name, ":", line_number, ": column ", name,
              " must be an integer >= 0, got \"", cell(name).substr(0, 32), "\"");
      return value;
    };
    const auto number = [&](const char* name) {
      size_t used = 0;
      double value = 0.0;
      try {
        value = std::stod(cell(name), &used);
      } catch (const std::exception&) {
        used = 0;
      }
      require(used > 0 && used == cell(name).size() && std::isfinite(value) && value >= 0.0, source_name, ":", line_number,
              ": column ", name, " must be a finite number >= 0, got \"", cell(name).substr(0, 32), "\"");
      return value;
    };
    const auto int32 = [&](const char* name) {
      const int64_t value = integer(name);
      require(value <= (int64_t{1} << 30), source_name, ":", line_number, ": column ", name, " is too large: ", value);
      return static_cast<int32_t>(value);
    };
    KernelMeasurement m;
    m.direction = cell("direction");
    require(m.direction == "forward" || m.direction == "backward", source_name, ":", line_number,
            ": column direction must be forward or backward, got \"", m.direction.substr(0, 32), "\"");
    m.q_heads = int32("q_heads");
    m.kv_heads = int32("kv_heads");
    m.local_tokens = integer("local_tokens");
    m.block_q = int32("block_q");
    m.block_k = int32("block_k");
    m.head_dim = int32("head_dim");
    m.tiles_per_list = int32("tiles_per_list");
    m.chunks_per_list = int32("chunks_per_list");
    m.lists = integer("lists");
    m.tiles = integer("tiles");
    m.column_chunks = integer("column_chunks");
    m.repeats = int32("repeats");
    m.median_us = number("median_us");
    m.min_us = number("min_us");
    m.max_us = number("max_us");
    m.under_filled = integer("under_filled") != 0;
    if (column.count("placement") == 1) m.placement = cell("placement");  // absent in the first H100 data: random
    result.push_back(m);
  }
  return result;
}

}  // namespace sparsering
