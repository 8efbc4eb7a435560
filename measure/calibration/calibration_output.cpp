// JSON through nlohmann-json; CSV and the table by hand (fixed column order, one header row).
#include "measure/calibration/calibration_output.hpp"

#include <nlohmann/json.hpp>

#include <sstream>

#include "common/table.hpp"

namespace sparsering {
namespace {

nlohmann::json coefficients_json(const KernelCostCoefficients& c) {
  return {{"launch_us", c.launch_us}, {"per_tile_us", c.per_tile_us}, {"per_vertical_chunk_us", c.per_vertical_chunk_us}};
}

nlohmann::json fit_json(const KernelFit& fit) {
  nlohmann::json coefficients = coefficients_json(fit.coefficients);
  coefficients["per_list_us"] = fit.per_list_us;
  return {{"coefficients", coefficients},
          {"samples", fit.samples},
          {"max_relative_error", fit.max_relative_error},
          {"median_relative_error", fit.median_relative_error},
          {"r_squared", fit.r_squared}};
}

std::string percent(double fraction) { return fixed(100.0 * fraction, 1) + "%"; }

std::string number(double value) {
  std::ostringstream out;
  out.precision(4);
  out << value;
  return out.str();
}

}  // namespace

std::string calibration_json(const CalibrationRun& run) {
  const GpuCalibration& cal = run.calibration;
  nlohmann::json doc;
  doc["format"] = "sparsering-calibration";
  doc["provenance"] = {{"gpu", cal.provenance.gpu},       {"driver", cal.provenance.driver},
                       {"cuda", cal.provenance.cuda},     {"nccl", cal.provenance.nccl},
                       {"commit", cal.provenance.commit}, {"date", cal.provenance.date}};
  doc["shape"] = {{"block_q", cal.block_q}, {"block_k", cal.block_k}, {"head_dim", cal.head_dim}};
  doc["gemm_efficiency"] = cal.gemm_efficiency;
  doc["forward"] = fit_json(run.forward_fit);
  doc["backward"] = fit_json(run.backward_fit);
  doc["forward_under_filled"] = fit_json(run.forward_under_filled);
  doc["backward_under_filled"] = fit_json(run.backward_under_filled);
  doc["forward_with_list_term"] = fit_json(run.forward_list_fit);
  doc["backward_with_list_term"] = fit_json(run.backward_list_fit);
  doc["forward_with_list_term_under_filled"] = fit_json(run.forward_list_under_filled);
  doc["backward_with_list_term_under_filled"] = fit_json(run.backward_list_under_filled);
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelMeasurement& k : run.kernels) {
    kernels.push_back({{"direction", k.direction},   {"q_heads", k.q_heads},
                       {"kv_heads", k.kv_heads},     {"local_tokens", k.local_tokens},
                       {"block_q", k.block_q},       {"block_k", k.block_k},
                       {"head_dim", k.head_dim},     {"tiles_per_list", k.tiles_per_list},
                       {"chunks_per_list", k.chunks_per_list}, {"placement", k.placement}, {"lists", k.lists},
                       {"tiles", k.tiles},           {"column_chunks", k.column_chunks},
                       {"repeats", k.repeats},       {"median_us", k.median_us},
                       {"min_us", k.min_us},         {"max_us", k.max_us},
                       {"under_filled", k.under_filled}, {"predicted_us", k.predicted_us},
                       {"predicted_list_us", k.predicted_list_us}});
  }
  doc["kernels"] = kernels;
  nlohmann::json hops = nlohmann::json::array();
  for (const HopMeasurement& h : run.hops) {
    hops.push_back({{"mode", h.mode},
                    {"gpus", h.gpus},
                    {"ring_size", h.ring_size},
                    {"bytes", h.bytes},
                    {"repeats", h.repeats},
                    {"iterations", h.iterations},
                    {"median_us", h.median_us},
                    {"min_us", h.min_us},
                    {"gbytes_per_s", h.gbytes_per_s}});
  }
  doc["hops"] = hops;
  if (run.has_link) {
    nlohmann::json curve = nlohmann::json::array();
    for (const BandwidthPoint& p : run.link.curve) curve.push_back({{"bytes", p.bytes}, {"gbytes_per_s", p.gbytes_per_s}});
    doc["link"] = {{"level", run.link_level},
                   {"latency_us", run.link.latency_us},
                   {"curve", curve},
                   {"max_relative_error", run.link.max_relative_error}};
  }
  doc["notes"] = run.notes;
  return doc.dump(2) + "\n";
}

std::string kernel_measurements_csv(const std::vector<KernelMeasurement>& kernels) {
  std::ostringstream out;
  out.precision(10);
  out << "direction,q_heads,kv_heads,local_tokens,block_q,block_k,head_dim,tiles_per_list,chunks_per_list,lists,tiles,"
         "column_chunks,repeats,median_us,min_us,max_us,under_filled,predicted_us,predicted_list_us,placement\n";
  for (const KernelMeasurement& k : kernels) {
    out << k.direction << ',' << k.q_heads << ',' << k.kv_heads << ',' << k.local_tokens << ',' << k.block_q << ','
        << k.block_k << ',' << k.head_dim << ',' << k.tiles_per_list << ',' << k.chunks_per_list << ',' << k.lists << ','
        << k.tiles << ',' << k.column_chunks << ',' << k.repeats << ',' << k.median_us << ',' << k.min_us << ','
        << k.max_us << ',' << (k.under_filled ? 1 : 0) << ',' << k.predicted_us << ',' << k.predicted_list_us << ',' << k.placement << '\n';
  }
  return out.str();
}

std::string hop_measurements_csv(const std::vector<HopMeasurement>& hops) {
  std::ostringstream out;
  out.precision(10);
  out << "mode,gpus,ring_size,bytes,repeats,iterations,median_us,min_us,gbytes_per_s\n";
  for (const HopMeasurement& h : hops) {
    out << h.mode << ',' << h.gpus << ',' << h.ring_size << ',' << h.bytes << ',' << h.repeats << ',' << h.iterations << ','
        << h.median_us << ',' << h.min_us << ',' << h.gbytes_per_s << '\n';
  }
  return out.str();
}

std::string fit_table(const CalibrationRun& run) {
  std::ostringstream out;
  const GpuCalibration& cal = run.calibration;
  out << "kernel cost fit (" << cal.provenance.gpu << ", block_q=" << cal.block_q << " block_k=" << cal.block_k
      << " head_dim=" << cal.head_dim << "; time = launch + per_tile x tiles + per_chunk x chunks [+ per_list x lists],"
      << " all heads; the GPU config takes the three-term form)\n";
  Table table({"direction", "terms", "launch_us", "per_list_us", "per_tile_us", "per_chunk_us", "samples", "median |err|",
               "max |err|", "R^2", "under-filled: n", "median |err|", "max |err|"});
  const auto row = [&](const char* name, const char* terms, const KernelFit& fit, const KernelFit& under) {
    const KernelCostCoefficients& c = fit.coefficients;
    table.add_row({name, terms, number(c.launch_us), number(fit.per_list_us), number(c.per_tile_us),
                   number(c.per_vertical_chunk_us), std::to_string(fit.samples), percent(fit.median_relative_error),
                   percent(fit.max_relative_error), fixed(fit.r_squared, 5), std::to_string(under.samples),
                   under.samples > 0 ? percent(under.median_relative_error) : "-",
                   under.samples > 0 ? percent(under.max_relative_error) : "-"});
  };
  row("forward", "3", run.forward_fit, run.forward_under_filled);
  row("forward", "4", run.forward_list_fit, run.forward_list_under_filled);
  row("backward", "3", run.backward_fit, run.backward_under_filled);
  row("backward", "4", run.backward_list_fit, run.backward_list_under_filled);
  table.print(out);
  if (run.has_link) {
    out << "link fit (" << run.link_level << "): latency " << number(run.link.latency_us) << " us, max |err| "
        << percent(run.link.max_relative_error) << "\n";
    Table curve({"bytes", "GB/s"});
    for (const BandwidthPoint& p : run.link.curve) curve.add_row({std::to_string(p.bytes), number(p.gbytes_per_s)});
    curve.print(out);
  }
  for (const std::string& note : run.notes) out << "note: " << note << "\n";
  return out.str();
}

}  // namespace sparsering
