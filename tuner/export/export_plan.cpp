#include "tuner/export/export_plan.hpp"

#include "common/error.hpp"
#include "tuner/export/chakra/chakra_export.hpp"
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
    case ExportTarget::torchtitan: return export_torchtitan(input);
    case ExportTarget::mtraining: return export_mtraining(input, options);
    case ExportTarget::torch: return export_torch(input);
    case ExportTarget::chakra: {
      require(!options.durations_path.empty(),
              "chakra export needs per-(rank, ring step) kernel durations, which plans do not carry: pass --durations ",
              "FILE.json ({\"forward\": [[ns per step] per rank], \"backward\": ...}; see docs/export.md)");
      check_plan_structure(input.plan);  // before reading a durations file against it
      const StepDurations durations = load_step_durations(options.durations_path.string(), input.plan);
      return export_chakra(input, durations, options.chakra_layers);
    }
  }
  throw InputError(str("unknown export target ", static_cast<int>(target)));
}

}  // namespace sparsering
