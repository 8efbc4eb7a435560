// The CSV reader is measure/calibration/csv_rows.hpp, as for the benchmark's measurements.
#include "measure/calibration/replayed_cells.hpp"

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "measure/calibration/csv_rows.hpp"
#include "measure/calibration/kernel_calibration.hpp"
#include "measure/validation/validation_json.hpp"

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
    // A prediction made again (`validate --measured`) stamps this binary's build on a measurement
    // of the kernels that ran then, which its predicted_again block names (measured_kernel_build):
    // the measured times are of those kernels, the counts of this tree's simulator.
    const std::optional<std::string> measured_kernel = measured_kernel_build(doc);
    require(measured_kernel.has_value(), source_name,
            ": the validation.json beside it does not name the kernel build it measured (one predicted again from an "
            "earlier measurement, --measured, by a version that did not record it); give the replay's own files, or "
            "predict those again");
    const std::string& measured_on = *measured_kernel;
    require(measured_on == kernel_build, source_name, ": replayed on kernel build ", measured_on,
            ", the calibration is of kernel build ", kernel_build, ": a replay of other kernels cannot enter its fit");
  } catch (const nlohmann::json::exception& error) {
    throw InputError(str(source_name, ": the validation.json beside it: ", error.what()));
  }
  require(!plan.empty() && plan.find_first_of(",\n\r") == std::string::npos, source_name,
          ": the replay's plan name is empty or holds a comma or a line break");

  static constexpr const char* kRequired[] = {"direction", "block_q", "block_k", "head_dim", "heads", "kv_heads",
                                              "chunk_tokens", "lists", "tiles", "columns", "column_chunks",
                                              "key_lists", "column_lists", "column_items", "key_blocks",
                                              "measured_us"};
  CsvRows rows(cells_csv, source_name, kRequired);
  std::vector<KernelMeasurement> out;
  while (rows.next()) {
    constexpr int64_t kSizeMost = int64_t{1} << 30;
    KernelMeasurement m;
    m.direction = rows.cell("direction");
    require(m.direction == "forward" || m.direction == "backward", rows.where(),
            ": column direction must be forward or backward, got \"", m.direction.substr(0, 32), "\"");
    m.block_q = static_cast<int32_t>(rows.integer("block_q", kSizeMost));
    m.block_k = static_cast<int32_t>(rows.integer("block_k", kSizeMost));
    m.head_dim = static_cast<int32_t>(rows.integer("head_dim", kSizeMost));
    m.q_heads = static_cast<int32_t>(rows.integer("heads", kSizeMost));
    m.kv_heads = static_cast<int32_t>(rows.integer("kv_heads", kSizeMost));
    m.local_tokens = rows.integer("chunk_tokens", int64_t{1} << 40);
    require(m.block_q >= 1 && m.block_k >= 1 && m.head_dim >= 1 && m.kv_heads >= 1 && m.q_heads >= 1 &&
                m.q_heads % m.kv_heads == 0,
            rows.where(), ": shape ", m.block_q, "x", m.block_k, "x", m.head_dim, " with ", m.q_heads, " heads over ",
            m.kv_heads, " K/V heads is not a launch");
    m.lists = rows.integer("lists");
    m.tiles = rows.integer("tiles");
    m.columns = rows.integer("columns");
    m.column_chunks = rows.integer("column_chunks");
    m.key_lists = rows.integer("key_lists");
    m.column_lists = rows.integer("column_lists");
    m.column_items = rows.integer("column_items");
    // Absent in replays written before the simulator counted it: -1, not recorded.
    m.longest_key_list = rows.has("longest_key_list") ? rows.integer("longest_key_list") : -1;
    m.tiles_per_list = 0;
    m.chunks_per_list = 0;
    m.columns_per_list = 0;
    m.placement = str(kReplayedPlacement, plan);
    const int64_t key_blocks = rows.integer("key_blocks");
    require(key_blocks == launched_key_blocks(m), rows.where(), ": ", key_blocks, " key blocks, but ", m.kv_heads,
            " K/V heads over ", m.local_tokens, " tokens in blocks of ", m.block_k, " have ", launched_key_blocks(m));
    if (m.tiles == 0 && m.column_chunks == 0) continue;  // nothing launched
    const double measured = rows.number("measured_us");
    require(measured > 0.0, rows.where(), ": a cell with work needs a measured_us > 0, got ", measured);
    m.median_us = m.min_us = m.max_us = measured;
    if (rows.has("measured_sm_clock_mhz") && !rows.cell("measured_sm_clock_mhz").empty()) {  // absent: not probed
      m.sm_clock_mhz = rows.number("measured_sm_clock_mhz");
      require(m.sm_clock_mhz >= 0.0, rows.where(), ": column measured_sm_clock_mhz must be >= 0, got ", m.sm_clock_mhz);
    }
    out.push_back(m);
  }
  return out;
}

}  // namespace sparsering
