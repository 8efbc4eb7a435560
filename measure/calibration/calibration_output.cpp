// JSON through nlohmann-json; CSV and the table by hand (fixed column order, one header row).
#include "measure/calibration/calibration_output.hpp"

#include <nlohmann/json.hpp>

#include <sstream>
#include <utility>

#include "common/error.hpp"
#include "common/table.hpp"

namespace sparsering {
namespace {

nlohmann::json coefficients_json(const KernelCostCoefficients& c) {
  return {{"launch_us", c.launch_us},
          {"per_list_us", c.per_list_us},
          {"per_tile_us", c.per_tile_us},
          {"per_vertical_chunk_us", c.per_vertical_chunk_us},
          {"per_key_list_us", c.per_key_list_us},
          {"per_column_list_us", c.per_column_list_us},
          {"per_column_item_us", c.per_column_item_us},
          {"per_column_us", c.per_column_us},
          {"per_key_block_us", c.per_key_block_us},
          {"per_critical_entry_us", c.per_critical_entry_us}};
}

nlohmann::json residuals_json(const std::vector<ResidualGroup>& groups) {
  nlohmann::json out = nlohmann::json::array();
  for (const ResidualGroup& g : groups) {
    out.push_back({{"value", g.value}, {"samples", g.samples}, {"median_signed_error", g.median_signed_error}});
  }
  return out;
}

nlohmann::json errors_json(const KernelFit& fit) {
  return {{"samples", fit.samples},
          {"median_relative_error", fit.median_relative_error},
          {"max_relative_error", fit.max_relative_error},
          {"r_squared", fit.r_squared}};
}

nlohmann::json direction_json(const DirectionFit& d) {
  return {{"coefficients", coefficients_json(d.fit.coefficients)},
          {"fit", errors_json(d.fit)},
          {"heldout",
           {{"folds", d.heldout.folds},
            {"seed", d.heldout.seed},
            {"dealings", d.heldout.dealings},
            {"median_relative_error", d.heldout.median_relative_error},
            {"max_relative_error", d.heldout.max_relative_error}}},
          {"under_filled", errors_json(d.under)},
          {"residuals_by_local_tokens", residuals_json(d.by_local_tokens)},
          {"residuals_by_gqa_group", residuals_json(d.by_group)},
          {"replays", d.replays},
          {"grid_weight", d.grid_weight},
          {"replayed_cells", errors_json(d.replayed)},
          {"replayed_cells_heldout",
           {{"folds", d.replayed_heldout.folds},
            {"median_relative_error", d.replayed_heldout.median_relative_error},
            {"max_relative_error", d.replayed_heldout.max_relative_error}}}};
}

nlohmann::json shape_json(const KernelShape& s) {
  return {{"block_q", s.block_q}, {"block_k", s.block_k}, {"head_dim", s.head_dim}};
}

std::string percent(double fraction) { return fixed(100.0 * fraction, 1) + "%"; }
std::string signed_percent(double fraction) { return (fraction >= 0.0 ? "+" : "") + percent(fraction); }

std::string number(double value) {
  std::ostringstream out;
  out.precision(4);
  out << value;
  return out.str();
}

std::string residual_line(const std::vector<ResidualGroup>& groups) {
  std::string line;
  for (const ResidualGroup& g : groups) {
    line += str(line.empty() ? "" : ", ", g.value, ": ", signed_percent(g.median_signed_error), " (", g.samples, ")");
  }
  return line;
}

}  // namespace

std::string calibration_json(const CalibrationRun& run) {
  const GpuCalibration& cal = run.calibration;
  nlohmann::json doc;
  doc["format"] = "sparsering-calibration";
  doc["version"] = 2;
  doc["kernel_build"] = cal.kernel_build;
  doc["provenance"] = {{"gpu", cal.provenance.gpu},       {"driver", cal.provenance.driver},
                       {"cuda", cal.provenance.cuda},     {"nccl", cal.provenance.nccl},
                       {"commit", cal.provenance.commit}, {"date", cal.provenance.date}};
  doc["gemm_efficiency"] = cal.gemm_efficiency;
  doc["sm_count"] = run.fit_options.sm_count;  // the critical-path term's per-SM share (0: no such term)
  doc["model"] =
      "forward: time_us = launch_us + per_list_us x lists + per_tile_us x tiles + per_vertical_chunk_us x column_chunks; "
      "backward (when its units are recorded): launch_us + per_key_list_us x key_lists + per_tile_us x tiles + "
      "per_column_list_us x column_lists + per_column_item_us x column_items (+ per_column_us x columns) "
      "(+ per_key_block_us x key blocks of the chunk: kv_heads x ceil(local_tokens / block_k)) "
      "(+ per_critical_entry_us x max(0, longest_key_list - tiles / sm_count): the heaviest key-block CTA's entries "
      "beyond the per-SM share)";
  nlohmann::json shapes = nlohmann::json::array();
  for (const ShapeFit& f : run.fits) {
    shapes.push_back({{"shape", shape_json(f.shape)}, {"forward", direction_json(f.forward)}, {"backward", direction_json(f.backward)}});
  }
  doc["shapes"] = shapes;
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelMeasurement& k : run.kernels) {
    kernels.push_back({{"direction", k.direction},   {"q_heads", k.q_heads},
                       {"kv_heads", k.kv_heads},     {"local_tokens", k.local_tokens},
                       {"block_q", k.block_q},       {"block_k", k.block_k},
                       {"head_dim", k.head_dim},     {"tiles_per_list", k.tiles_per_list},
                       {"chunks_per_list", k.chunks_per_list}, {"placement", k.placement}, {"lists", k.lists},
                       {"tiles", k.tiles},           {"column_chunks", k.column_chunks},
                       {"columns_per_list", k.columns_per_list}, {"key_lists", k.key_lists},
                       {"column_lists", k.column_lists}, {"column_items", k.column_items}, {"columns", k.columns},
                       {"longest_key_list", k.longest_key_list},
                       {"key_block_stride", k.key_block_stride},
                       {"repeats", k.repeats},       {"median_us", k.median_us},
                       {"min_us", k.min_us},         {"max_us", k.max_us},
                       {"under_filled", k.under_filled}, {"predicted_us", k.predicted_us},
                       {"key_pass_us", k.key_pass_us}, {"sm_clock_mhz", k.sm_clock_mhz}});
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
         "column_chunks,repeats,median_us,min_us,max_us,under_filled,predicted_us,placement,columns_per_list,key_lists,"
         "column_lists,column_items,columns,key_block_stride,key_pass_us,longest_key_list,sm_clock_mhz\n";
  for (const KernelMeasurement& k : kernels) {
    out << k.direction << ',' << k.q_heads << ',' << k.kv_heads << ',' << k.local_tokens << ',' << k.block_q << ','
        << k.block_k << ',' << k.head_dim << ',' << k.tiles_per_list << ',' << k.chunks_per_list << ',' << k.lists << ','
        << k.tiles << ',' << k.column_chunks << ',' << k.repeats << ',' << k.median_us << ',' << k.min_us << ','
        << k.max_us << ',' << (k.under_filled ? 1 : 0) << ',' << k.predicted_us << ',' << k.placement << ','
        << k.columns_per_list << ',' << k.key_lists << ',' << k.column_lists << ',' << k.column_items << ',' << k.columns
        << ',' << k.key_block_stride << ',' << k.key_pass_us << ',' << k.longest_key_list << ',' << k.sm_clock_mhz
        << '\n';
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
  if (!run.fits.empty()) {
    out << "kernel cost fit (" << cal.provenance.gpu << ", kernel build " << cal.kernel_build
        << "): time = launch + per_list x lists + per_tile x tiles + per_chunk x chunks (forward), launch + per_key_list x "
           "key lists + per_tile x tiles + per_column_list x column lists + per_item x column items (+ per_column x "
           "columns) (+ per_key_block x key blocks of the chunk) (+ per_critical_entry x entries of the heaviest key-block "
           "segment beyond tiles / SMs) (backward, when its units are recorded), all heads; held-out: "
        << run.fit_options.folds << "-fold by benchmark case, dealt " << run.fit_options.dealings
        << (run.fit_options.dealings == 1 ? " time" : " times") << " from seed " << run.fit_options.seed
        << "; medians weigh each launch as the fit does"
        << (run.fit_options.sm_count > 0 ? str("; ", run.fit_options.sm_count, " SMs share the tiles") : std::string())
        << "\n";
    Table table({"shape", "direction", "launch_us", "per_list_us", "per_tile_us", "per_chunk_us", "per_key_list_us",
                 "per_column_list_us", "per_item_us", "per_column_us", "per_key_block_us", "per_critical_entry_us",
                 "samples", "median |err|",
                 "max |err|", "held-out median", "held-out max", "R^2", "under-filled: n", "median |err|", "max |err|"});
    for (const ShapeFit& f : run.fits) {
      for (const auto& [name, d] : {std::pair<const char*, const DirectionFit*>{"forward", &f.forward}, {"backward", &f.backward}}) {
        const KernelCostCoefficients& c = d->fit.coefficients;
        table.add_row({to_string(f.shape), name, number(c.launch_us), number(c.per_list_us), number(c.per_tile_us),
                       number(c.per_vertical_chunk_us), number(c.per_key_list_us), number(c.per_column_list_us),
                       number(c.per_column_item_us), number(c.per_column_us), number(c.per_key_block_us),
                       number(c.per_critical_entry_us),
                       std::to_string(d->fit.samples),
                       percent(d->fit.median_relative_error),
                       percent(d->fit.max_relative_error), percent(d->heldout.median_relative_error),
                       percent(d->heldout.max_relative_error), fixed(d->fit.r_squared, 5), std::to_string(d->under.samples),
                       d->under.samples > 0 ? percent(d->under.median_relative_error) : "-",
                       d->under.samples > 0 ? percent(d->under.max_relative_error) : "-"});
      }
    }
    table.print(out);
    out << "median residual (fit - measured) of the fitted launches, by local tokens and by query heads per KV head "
           "(launches):\n";
    for (const ShapeFit& f : run.fits) {
      for (const auto& [name, d] : {std::pair<const char*, const DirectionFit*>{"forward", &f.forward}, {"backward", &f.backward}}) {
        out << "  " << to_string(f.shape) << " " << name << ": tokens " << residual_line(d->by_local_tokens) << "; group "
            << residual_line(d->by_group) << "\n";
      }
    }
    for (const ShapeFit& f : run.fits) {
      for (const auto& [name, d] : {std::pair<const char*, const DirectionFit*>{"forward", &f.forward}, {"backward", &f.backward}}) {
        if (d->replays == 0) continue;
        out << "  " << to_string(f.shape) << " " << name << ": " << d->replayed.samples << " replayed ring cells of "
            << d->replays << " replays, grid weight " << number(d->grid_weight) << ": median |err| "
            << percent(d->replayed.median_relative_error) << ", max " << percent(d->replayed.max_relative_error);
        if (d->replayed_heldout.folds >= 2) {
          out << "; each replay held out: median " << percent(d->replayed_heldout.median_relative_error) << ", max "
              << percent(d->replayed_heldout.max_relative_error);
        }
        out << "\n";
      }
    }
  }
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
