// JSON and Perfetto outputs of a validation (see validation_json.hpp).
#include "measure/validation/validation_json.hpp"

#include <algorithm>
#include <sstream>
#include <string>

#include "common/error.hpp"

#include "sim/core/sim_time.hpp"
#include "sim/output/result_json.hpp"

namespace sparsering {
namespace {

using nlohmann::json;

json errors_json(const ErrorSummary& e) {
  return json{{"cells", e.count},
              {"median_abs", e.median_abs},
              {"worst_abs", e.worst_abs},
              {"worst_signed", e.worst_signed},
              {"mean_signed", e.mean_signed}};
}

json pass_json(const PassComparison& pass) {
  json out{{"predicted_ms", pass.predicted_ms},
           {"measured_ms", pass.measured_ms},
           {"error", pass.error},
           {"predicted_exposed_comm_ms", pass.predicted_exposed_comm_ms},
           {"measured_exposed_comm_ms", pass.measured_exposed_comm_ms},
           {"compute_error", errors_json(pass.compute_error)},
           {"predicted_compute_us", pass.predicted_compute_us},
           {"measured_compute_us", pass.measured_compute_us},
           {"predicted_step_us", pass.predicted_step_us},
           {"measured_step_us", pass.measured_step_us},
           {"predicted_comm_us", pass.predicted_comm_us},
           {"measured_comm_us", pass.measured_comm_us},
           {"step_overlap_ratio", pass.step_overlap_ratio}};
  if (!pass.measured_sm_clock_mhz.empty()) out["measured_sm_clock_mhz"] = pass.measured_sm_clock_mhz;
  return out;
}

void add_event(json& events, const std::string& name, int32_t pid, int32_t tid, double ts_us, double dur_us,
               const json& args) {
  events.push_back(json{{"name", name}, {"ph", "X"}, {"pid", pid}, {"tid", tid}, {"ts", ts_us}, {"dur", dur_us},
                        {"args", args}});
}

/// Events of one pass starting at `offset_us`; returns the pass end.
double add_pass(json& events, const ValidationReport& report, const PassComparison& pass, const MeasuredPass& measured,
                double offset_us) {
  const int32_t w = report.ranks;
  const char* dir = pass.backward ? "bwd" : "fwd";
  double end = offset_us;
  const bool replay = report.mode == "replay";
  const bool timed = !replay && measured.compute_start_us.size() == measured.compute_us.size();
  for (int32_t p = 0; p < w; ++p) {
    for (int32_t t = 0; t < w; ++t) {
      const size_t k = static_cast<size_t>(p) * static_cast<size_t>(w) + static_cast<size_t>(t);
      const double dur = measured.compute_us[k];
      double start = 0.0;
      if (replay) {
        start = ns_to_us(pass.derived_run.at(p, t).compute_start_ns);
      } else if (timed) {
        start = measured.compute_start_us[k];
      } else {
        continue;
      }
      add_event(events, std::string(dir) + " step " + std::to_string(t), p, 0, offset_us + start, dur,
                json{{"position", p}, {"step", t}, {"predicted_us", pass.predicted_compute_us[k]}});
      end = std::max(end, offset_us + start + dur);
      if (replay && t >= 1) {
        const RingStepRecord& r = pass.derived_run.at(p, t);
        add_event(events, std::string(dir) + " recv " + std::to_string(t), p, 1, offset_us + ns_to_us(r.recv_start_ns),
                  ns_to_us(r.recv_end_ns - r.recv_start_ns), json{{"source", "link model"}});
      } else if (!replay && t >= 1 && measured.comm_start_us.size() == measured.compute_us.size() &&
                 measured.comm_us.size() == measured.compute_us.size()) {
        add_event(events, std::string(dir) + " recv " + std::to_string(t), p, 1,
                  offset_us + measured.comm_start_us[k], measured.comm_us[k], json{{"source", "measured"}});
      }
    }
  }
  if (replay) end = std::max(end, offset_us + ns_to_us(pass.derived_run.end_ns));
  if (!replay) end = std::max(end, offset_us + pass.measured_ms * 1e3);
  return end;
}

}  // namespace

nlohmann::json validation_to_json(const ValidationReport& report, const nlohmann::json& provenance) {
  json out;
  out["format"] = "sparsering-validation";
  out["version"] = 1;
  out["mode"] = report.mode;
  out["plan"] = report.plan_name;
  out["description"] = report.description;
  out["layout"] = report.layout;
  out["dense"] = report.dense;
  out["seq_len_tokens"] = report.seq_len_tokens;
  out["ranks"] = report.ranks;
  out["ring_levels"] = report.level_sizes;
  out["layer"] = report.layer;
  out["sample"] = report.sample;
  out["iterations"] = report.iterations;
  out["cost_source"] = report.cost_source;
  out["calibration"] = calibration_status_json(report.calibration);
  out["comparison_meaningful"] = report.comparison_meaningful;
  out["predicted_work"] = work_json(report.predicted_work);
  out["measured_work"] = json{{"tiles", report.measured_tiles}, {"column_chunks", report.measured_column_chunks}};
  out["forward"] = pass_json(report.forward);
  out["backward"] = pass_json(report.backward);
  out["targets"] = json{{"layer_time_worst_abs_error", kLayerTimeWorstTarget},
                        {"layer_time_median_abs_error", kLayerTimeMedianTarget},
                        {"cell_time_median_abs_error", kCellTimeMedianTarget},
                        {"step_overlap_ratio", kStepOverlapTarget},
                        {"layer_time_met", report.layer_time_met},
                        {"cell_time_met", report.cell_time_met},
                        {"step_overlap_met", report.mode == "ring" ? json(report.step_overlap_met) : json(nullptr)}};
  out["provenance"] = provenance;
  return out;
}

nlohmann::json measured_timeline_json(const ValidationReport& report, const MeasuredLayer& measured) {
  json events = json::array();
  for (int32_t p = 0; p < report.ranks; ++p) {
    events.push_back(json{{"name", "process_name"}, {"ph", "M"}, {"pid", p}, {"args", {{"name", "position " + std::to_string(p)}}}});
    events.push_back(json{{"name", "thread_name"}, {"ph", "M"}, {"pid", p}, {"tid", 0}, {"args", {{"name", "compute"}}}});
    events.push_back(json{{"name", "thread_name"}, {"ph", "M"}, {"pid", p}, {"tid", 1}, {"args", {{"name", "recv"}}}});
  }
  const double forward_end = add_pass(events, report, report.forward, measured.forward, 0.0);
  add_pass(events, report, report.backward, measured.backward, forward_end);
  json metadata{{"mode", report.mode}, {"plan", report.plan_name}, {"layer", report.layer}};
  metadata["placement"] = report.mode == "replay"
                              ? "kernel durations measured on one GPU; start times from the simulator's schedule "
                                "re-run with them; transfers from the link model"
                              : "measured on the ring's GPUs";
  return json{{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"metadata", metadata}};
}

std::optional<std::string> measured_kernel_build(const nlohmann::json& validation) {
  const auto string_at = [](const nlohmann::json& object, const char* key) -> std::optional<std::string> {
    if (!object.is_object() || !object.contains(key) || !object.at(key).is_string()) return std::nullopt;
    return object.at(key).get<std::string>();
  };
  if (!validation.is_object()) return std::nullopt;
  const nlohmann::json provenance = validation.value("provenance", nlohmann::json::object());
  if (provenance.is_object() && provenance.contains("predicted_again")) {
    return string_at(provenance.at("predicted_again"), "measured_kernel_build");
  }
  return string_at(validation.value("calibration", nlohmann::json::object()), "this_kernel_build");
}

std::string validation_cells_csv(const ValidationReport& report) {
  const auto w = static_cast<size_t>(report.ranks);
  const int64_t key_blocks = report.launch.key_blocks();
  std::ostringstream out;
  // 9 significant digits keep every nanosecond of a cell up to one second.
  out.precision(9);
  out << "direction,position,step,block_q,block_k,head_dim,heads,kv_heads,chunk_tokens,lists,tiles,masked_tiles,"
         "columns,column_chunks,key_lists,column_lists,column_items,longest_key_list,key_blocks,measured_us,"
         "predicted_us,measured_sm_clock_mhz\n";
  const LaunchGeometry& g = report.launch;
  for (const PassComparison* pass : {&report.forward, &report.backward}) {
    require(pass->cell_work.size() == w * w, "the ", pass->backward ? "backward" : "forward", " pass kept ",
            pass->cell_work.size(), " cell work counts for a ring of ", w, " (simulate with keep_ring_records)");
    for (size_t p = 0; p < w; ++p) {
      for (size_t t = 0; t < w; ++t) {
        const size_t k = p * w + t;
        const WorkCounts& c = pass->cell_work[k];
        out << (pass->backward ? "backward" : "forward") << ',' << p << ',' << t << ',' << report.block_q << ','
            << g.block_k << ',' << report.head_dim << ',' << g.heads << ',' << g.kv_heads << ',' << g.chunk_tokens
            << ',' << c.lists << ',' << c.tiles
            << ',' << c.masked_tiles << ',' << c.columns << ',' << c.column_chunks << ',' << c.key_lists << ','
            << c.column_lists << ',' << c.column_items << ',' << c.longest_key_list << ',' << key_blocks << ','
            << pass->measured_compute_us[k] << ',' << pass->predicted_compute_us[k] << ',';
        if (!pass->measured_sm_clock_mhz.empty()) out << pass->measured_sm_clock_mhz[k];  // empty: not measured
        out << '\n';
      }
    }
  }
  return out.str();
}

}  // namespace sparsering
