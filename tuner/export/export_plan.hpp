// The single entry point of `sparsering export`: dispatches a plan to the exporter of a target.
// Tested in tests/tuner/export_plan_test.cpp.
#pragma once

#include "tuner/export/export_bundle.hpp"
#include "tuner/export/export_target.hpp"

namespace sparsering {

/// Exports `input` to `target`. Chakra takes its per-(rank, step) durations from
/// options.durations_path, or simulates the plan in-process (options.trace_path) when none is
/// given. Throws InputError for a bad plan or options; writes nothing.
ExportBundle export_plan(ExportTarget target, const ExportInput& input, const ExportOptions& options);

}  // namespace sparsering
