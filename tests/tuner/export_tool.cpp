// Test helper for tests/tuner/torch_ring_test.py: `tuner_export_tool TARGET PLAN.yaml OUT_DIR`
// loads the plan with its model and cluster and writes the export of TARGET (overwriting), so the
// Python test does not depend on how the CLI is wired. Exit 2 with the message on bad input.
#include <exception>
#include <iostream>

#include "common/error.hpp"
#include "sim/config/plan_config.hpp"
#include "tuner/export/export_bundle.hpp"
#include "tuner/export/export_plan.hpp"

int main(int argc, char** argv) {
  using namespace sparsering;
  if (argc != 4) {
    std::cerr << "usage: tuner_export_tool TARGET PLAN.yaml OUT_DIR\n";
    return 2;
  }
  try {
    const ExportTarget target = parse_export_target(argv[1]);
    const LoadedPlan loaded = load_plan_with_inputs(argv[2]);
    const ExportBundle bundle =
        export_plan(target, ExportInput{loaded.plan, loaded.model, loaded.cluster}, ExportOptions{});
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
