// Columns are found by header name, as in the benchmark's CSV reader, so later columns do not
// break older readers.
#include "measure/calibration/replayed_cells.hpp"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.hpp"
#include "measure/calibration/kernel_calibration.hpp"

namespace sparsering {

bool is_replayed_cell(const KernelMeasurement& m) { return m.placement.starts_with(kReplayedPlacement); }

std::vector<KernelMeasurement> parse_replayed_cells(const std::string& cells_csv, const std::string& validation_json,
                                                    std::string_view source_name, std::string_view kernel_build) {
  std::string plan;
  try {
    const nlohmann::json doc = nlohmann::json::parse(validation_json);
    require(doc.value("format", "") == "sparsering-validation" && doc.value("mode", "") == "replay", source_name,
            ": the validation.json beside it is not a replay's (format sparsering-validation, mode replay)");
    plan = doc.at("plan").get<std::string>();
    const std::string measured_on = doc.at("calibration").at("this_kernel_build").get<std::string>();
    require(measured_on == kernel_build, source_name, ": replayed on kernel build ", measured_on,
            ", the calibration is of kernel build ", kernel_build, ": a replay of other kernels cannot enter its fit");
  } catch (const nlohmann::json::exception& error) {
    throw InputError(str(source_name, ": the validation.json beside it: ", error.what()));
  }
  require(!plan.empty() && plan.find_first_of(",\n\r") == std::string::npos, source_name,
          ": the replay's plan name is empty or holds a comma or a line break");

  std::istringstream in(cells_csv);
  std::string line;
  require(static_cast<bool>(std::getline(in, line)), source_name, ": empty file, expected a header row");
  const auto split = [](const std::string& text) {
    std::vector<std::string> cells;
    std::istringstream fields(text);
    for (std::string cell; std::getline(fields, cell, ',');) cells.push_back(cell);
    return cells;
  };
  const std::vector<std::string> header = split(line);
  std::map<std::string, size_t> column;
  for (size_t k = 0; k < header.size(); ++k) column[header[k]] = k;
  const char* required[] = {"direction", "block_q", "block_k", "head_dim", "heads", "kv_heads", "chunk_tokens",
                            "lists", "tiles", "columns", "column_chunks", "key_lists", "column_lists",
                            "column_items", "key_blocks", "measured_us"};
  for (const char* name : required) require(column.count(name) == 1, source_name, ": no column \"", name, "\" in the header");

  std::vector<KernelMeasurement> out;
  int64_t line_number = 1;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty()) continue;
    const std::vector<std::string> cells = split(line);
    require(cells.size() >= header.size(), source_name, ":", line_number, ": ", cells.size(), " cells, the header has ",
            header.size());
    const auto cell = [&](const char* name) -> const std::string& { return cells[column.at(name)]; };
    const auto integer = [&](const char* name, int64_t most) {
      size_t used = 0;
      int64_t value = -1;
      try {
        value = std::stoll(cell(name), &used);
      } catch (const std::exception&) {
        used = 0;
      }
      require(used > 0 && used == cell(name).size() && value >= 0 && value <= most, source_name, ":", line_number,
              ": column ", name, " must be an integer in [0, ", most, "], got \"", cell(name).substr(0, 32), "\"");
      return value;
    };
    constexpr int64_t kCountMost = int64_t{1} << 50;
    constexpr int64_t kSizeMost = int64_t{1} << 30;
    KernelMeasurement m;
    m.direction = cell("direction");
    require(m.direction == "forward" || m.direction == "backward", source_name, ":", line_number,
            ": column direction must be forward or backward, got \"", m.direction.substr(0, 32), "\"");
    m.block_q = static_cast<int32_t>(integer("block_q", kSizeMost));
    m.block_k = static_cast<int32_t>(integer("block_k", kSizeMost));
    m.head_dim = static_cast<int32_t>(integer("head_dim", kSizeMost));
    m.q_heads = static_cast<int32_t>(integer("heads", kSizeMost));
    m.kv_heads = static_cast<int32_t>(integer("kv_heads", kSizeMost));
    m.local_tokens = integer("chunk_tokens", kCountMost);
    require(m.block_q >= 1 && m.block_k >= 1 && m.head_dim >= 1 && m.kv_heads >= 1 && m.q_heads % m.kv_heads == 0,
            source_name, ":", line_number, ": shape ", m.block_q, "x", m.block_k, "x", m.head_dim, " with ", m.q_heads,
            " heads over ", m.kv_heads, " K/V heads is not a launch");
    m.lists = integer("lists", kCountMost);
    m.tiles = integer("tiles", kCountMost);
    m.columns = integer("columns", kCountMost);
    m.column_chunks = integer("column_chunks", kCountMost);
    m.key_lists = integer("key_lists", kCountMost);
    m.column_lists = integer("column_lists", kCountMost);
    m.column_items = integer("column_items", kCountMost);
    m.tiles_per_list = 0;
    m.chunks_per_list = 0;
    m.columns_per_list = 0;
    m.placement = str(kReplayedPlacement, plan);
    const int64_t key_blocks = integer("key_blocks", kCountMost);
    require(key_blocks == launched_key_blocks(m), source_name, ":", line_number, ": ", key_blocks,
            " key blocks, but ", m.kv_heads, " K/V heads over ", m.local_tokens, " tokens in blocks of ", m.block_k,
            " have ", launched_key_blocks(m));
    if (m.tiles == 0 && m.column_chunks == 0) continue;  // nothing launched
    size_t used = 0;
    double measured = 0.0;
    try {
      measured = std::stod(cell("measured_us"), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    require(used > 0 && used == cell("measured_us").size() && std::isfinite(measured) && measured > 0.0, source_name,
            ":", line_number, ": a cell with work needs a measured_us > 0, got \"", cell("measured_us").substr(0, 32),
            "\"");
    m.median_us = m.min_us = m.max_us = measured;
    out.push_back(m);
  }
  return out;
}

}  // namespace sparsering
