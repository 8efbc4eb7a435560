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

std::string_view to_string(TorchtitanFormat format) {
  switch (format) {
    case TorchtitanFormat::python: return "python";
    case TorchtitanFormat::toml_v0_2: return "toml-v0.2";
  }
  return "unknown";
}

TorchtitanFormat parse_torchtitan_format(std::string_view name) {
  for (const TorchtitanFormat format : {TorchtitanFormat::python, TorchtitanFormat::toml_v0_2}) {
    if (to_string(format) == name) return format;
  }
  throw InputError(str("unknown torchtitan format '", name,
                       "' (expected python, for current torchtitan, or toml-v0.2, for torchtitan up to v0.2.2)"));
}

}  // namespace sparsering
