#include "tuner/export/export_target.hpp"

#include "common/error.hpp"

namespace sparsering {

std::string_view to_string(ExportTarget target) {
  switch (target) {
    case ExportTarget::megatron: return "megatron";
    case ExportTarget::te: return "te";
    case ExportTarget::torchtitan: return "torchtitan";
    case ExportTarget::mtraining: return "mtraining";
    case ExportTarget::chakra: return "chakra";
    case ExportTarget::torch: return "torch";
  }
  return "unknown";
}

std::vector<ExportTarget> all_export_targets() {
  return {ExportTarget::megatron, ExportTarget::te,     ExportTarget::torchtitan,
          ExportTarget::mtraining, ExportTarget::chakra, ExportTarget::torch};
}

ExportTarget parse_export_target(std::string_view name) {
  for (const ExportTarget target : all_export_targets()) {
    if (to_string(target) == name) return target;
  }
  throw InputError(str("unknown export target '", name,
                       "' (expected megatron, te, torchtitan, mtraining, chakra or torch)"));
}

}  // namespace sparsering
