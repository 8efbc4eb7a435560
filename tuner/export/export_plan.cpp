#include "tuner/export/export_plan.hpp"

#include "common/error.hpp"
#include "tuner/export/chakra/chakra_export.hpp"
#include "tuner/export/chakra/simulated_durations.hpp"
#include "tuner/export/megatron_export.hpp"
#include "tuner/export/mtraining_export.hpp"
#include "tuner/export/plan_export_checks.hpp"
#include "tuner/export/te_export.hpp"
#include "tuner/export/torch_export.hpp"
#include "tuner/export/torchtitan_export.hpp"

namespace sparsering {

ExportBundle export_plan(ExportTarget target, const ExportInput& input, const ExportOptions& options) {
  switch (target) {
    case ExportTarget::megatron: return export_megatron(input);
    case ExportTarget::te: return export_te(input);
    case ExportTarget::torchtitan: return export_torchtitan(input, options.torchtitan_format);
    case ExportTarget::mtraining: return export_mtraining(input, options);
    case ExportTarget::torch: return export_torch(input);
    case ExportTarget::chakra: {
      require(options.durations_path.empty() || options.trace_path.empty(),
              "chakra export: pass either --durations FILE.json or --trace (simulate the plan), not both");
      // Checked before a durations file is read against the plan or the plan is simulated.
      check_export_input(input);
      const StepDurations durations =
          options.durations_path.empty()
              ? simulate_step_durations(input, options.trace_path, options.trace_sample)
              : load_step_durations(options.durations_path.string(), input.plan);
      ExportBundle bundle = export_chakra(input, durations, options.chakra_layers);
      const std::filesystem::path trace = options.trace_path.empty() ? input.plan.trace_path : options.trace_path;
      bundle.notes.push_back(
          !options.durations_path.empty()
              ? str("step durations: read from ", options.durations_path.string())
              : str("step durations: the plan simulated in-process (as `sparsering simulate` does)",
                    input.plan.sparse.enabled ? str(" on trace ", trace.string(), ", sample ", options.trace_sample)
                                              : std::string(" with dense attention")));
      return bundle;
    }
  }
  throw InputError(str("unknown export target ", static_cast<int>(target)));
}

}  // namespace sparsering
