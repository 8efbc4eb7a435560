// Side-by-side tables of a validation (see validation_table.hpp).
#include "measure/validation/validation_table.hpp"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/median.hpp"
#include "common/table.hpp"

namespace sparsering {
namespace {

std::string percent(double error) { return str(error >= 0 ? "+" : "", fixed(100.0 * error, 1), "%"); }

std::string cell_or_dash(const std::vector<double>& values, size_t k, int digits) {
  return k < values.size() ? fixed(values[k], digits) : "-";
}

/// Median and lowest clock of the cells that launched (clock > 0); both 0 without a clock.
struct CellClocks {
  double median = 0.0;
  double lowest = 0.0;
};

CellClocks cell_clocks(std::vector<double> clocks) {
  std::erase_if(clocks, [](double mhz) { return !(mhz > 0.0); });
  if (clocks.empty()) return {};
  const double lowest = *std::min_element(clocks.begin(), clocks.end());
  return {median(std::move(clocks)), lowest};
}

/// A replay whose cells ran this much below the calibration's clock is pointed out: a kernel bound
/// by its tensor cores runs about that much slower than the calibration predicts.
constexpr double kClockDropNoted = 0.03;

}  // namespace

void print_validation(std::ostream& out, const ValidationReport& report, int max_steps) {
  out << "validate " << report.plan_name << ", layer " << report.layer << " (" << report.mode << "): "
      << report.description << "\n";
  out << "predicted kernel costs: " << report.cost_source << (report.calibration.published() ? " (published figures)" : "")
      << "\n";
  if (!report.comparison_meaningful) {
    out << "NOT MEANINGFUL: the prediction's calibration was measured on kernel build " << report.calibration.kernel_build
        << ", these kernels are " << report.calibration.this_kernel_build
        << "; the errors below say nothing about the model until the GPU is recalibrated (docs/calibration.md)\n";
  }
  if (report.mode == "replay") {
    out << "measured layer times: the simulator's ring schedule over the compute matrix measured on one GPU\n";
  }
  Table summary({"figure", "predicted", "measured", "error"});
  std::ostringstream clock_notes;  // printed after the table
  const double calibrated = report.calibration.sm_clock_mhz;
  for (const PassComparison* pass : {&report.forward, &report.backward}) {
    const char* dir = pass->backward ? "bwd" : "fwd";
    summary.add_row({str("attention ", dir, " (ms)"), fixed(pass->predicted_ms, 3), fixed(pass->measured_ms, 3),
                     percent(pass->error)});
    summary.add_row({str("exposed comm ", dir, " (ms)"), fixed(pass->predicted_exposed_comm_ms, 3),
                     fixed(pass->measured_exposed_comm_ms, 3), "-"});
    summary.add_row({str("compute ", dir, " per (rank, step)"), str(pass->compute_error.count, " cells"),
                     str("median |err| ", fixed(100.0 * pass->compute_error.median_abs, 1), "%"),
                     str("worst ", percent(pass->compute_error.worst_signed))});
    const CellClocks clocks = cell_clocks(pass->measured_sm_clock_mhz);
    if (clocks.median > 0.0) {  // the GPU's power cap lowers it under heavy work
      summary.add_row({str("SM clock ", dir, " (timed launches)"),
                       calibrated > 0.0 ? str("calibrated at ", fixed(calibrated, 0), " MHz") : "-",
                       str("median ", fixed(clocks.median, 0), " MHz, lowest ", fixed(clocks.lowest, 0), " MHz"), "-"});
    }
    if (calibrated > 0.0 && clocks.median > 0.0 && clocks.median < (1.0 - kClockDropNoted) * calibrated) {
      clock_notes << "note: the " << (pass->backward ? "backward" : "forward") << "'s kernels ran at a median "
                  << fixed(clocks.median, 0) << " MHz, " << fixed(100.0 * (1.0 - clocks.median / calibrated), 1)
                  << "% below the " << fixed(calibrated, 0)
                  << " MHz of their calibration (the GPU's power cap, most likely): kernels bound by their tensor "
                     "cores run that much slower than predicted (docs/VALIDATION.md, \"The power cap\")\n";
    }
  }
  summary.print(out);
  out << clock_notes.str();

  const auto steps = static_cast<size_t>(report.ranks);
  const size_t shown = std::min(steps, static_cast<size_t>(std::max(max_steps, 1)));
  Table per_step({"step", "fwd step pred (us)", "fwd step meas (us)", "fwd comm pred (us)", "bwd step pred (us)",
                  "bwd step meas (us)", "fwd overlap", "bwd overlap"});
  for (size_t t = 0; t < shown; ++t) {
    const auto ratio = [&](const PassComparison& pass) {
      return t >= 1 && t - 1 < pass.step_overlap_ratio.size() ? fixed(pass.step_overlap_ratio[t - 1], 2) : "-";
    };
    per_step.add_row({std::to_string(t), cell_or_dash(report.forward.predicted_step_us, t, 1),
                      cell_or_dash(report.forward.measured_step_us, t, 1),
                      cell_or_dash(report.forward.predicted_comm_us, t, 1),
                      cell_or_dash(report.backward.predicted_step_us, t, 1),
                      cell_or_dash(report.backward.measured_step_us, t, 1), ratio(report.forward),
                      ratio(report.backward)});
  }
  out << "per ring step (slowest position):\n";
  per_step.print(out);
  if (shown < steps) out << "(" << steps - shown << " more steps in validation.json)\n";
  out << "target per-layer attention time within " << fixed(100.0 * kLayerTimeWorstTarget, 0)
      << "% (fwd and bwd): " << (report.layer_time_met ? "met" : "MISSED")
      << (report.comparison_meaningful ? "" : " (not meaningful: stale calibration)") << "\n";
  out << "target median (rank, step) kernel time within " << fixed(100.0 * kCellTimeMedianTarget, 0)
      << "% (fwd and bwd): " << (report.cell_time_met ? "met" : "MISSED") << "\n";
  if (report.mode == "ring") {
    out << "target measured step <= " << fixed(kStepOverlapTarget, 2) << " x max(compute, comm): "
        << (report.step_overlap_met ? "met" : "MISSED") << "\n";
  }
}

}  // namespace sparsering
