// Test helper for the Python tests in tests/tuner/ (torch_ring_test.py, framework_rules_test.py):
// `tuner_export_tool TARGET PLAN.yaml OUT_DIR [--torchtitan-format F] [--pattern-config NAME]`
// loads the plan with its model and cluster and writes the export of TARGET (overwriting), so the
// Python tests do not depend on how the CLI is wired. Exit 2 with the message on bad input.
#include <exception>
#include <iostream>
#include <string>

#include "common/error.hpp"
#include "sim/config/plan_config.hpp"
#include "tuner/export/export_bundle.hpp"
#include "tuner/export/export_plan.hpp"

int main(int argc, char** argv) {
  using namespace sparsering;
  if (argc < 4 || argc % 2 != 0) {
    std::cerr << "usage: tuner_export_tool TARGET PLAN.yaml OUT_DIR [--torchtitan-format F] [--pattern-config NAME]\n";
    return 2;
  }
  try {
    const ExportTarget target = parse_export_target(argv[1]);
    ExportOptions options;
    for (int i = 4; i + 1 < argc; i += 2) {
      const std::string flag = argv[i];
      if (flag == "--torchtitan-format") {
        options.torchtitan_format = parse_torchtitan_format(argv[i + 1]);
      } else if (flag == "--pattern-config") {
        options.pattern_config_name = argv[i + 1];
      } else {
        throw InputError(str("unknown option ", flag));
      }
    }
    const LoadedPlan loaded = load_plan_with_inputs(argv[2]);
    const ExportBundle bundle = export_plan(target, ExportInput{loaded.plan, loaded.model, loaded.cluster}, options);
    write_export_bundle(bundle, argv[3], true);
  } catch (const InputError& error) {
    std::cerr << "error: " << error.what() << '\n';
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "internal error: " << error.what() << '\n';
    return 1;
  }
  return 0;
}
