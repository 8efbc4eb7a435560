// Per-(rank, ring step) kernel durations that the Chakra exporter turns into COMP nodes
// (`sparsering export --to chakra --durations FILE.json`). Two JSON inputs are read:
//
// 1. The step-durations schema (one attention layer, written by hand or by any tool):
//      {
//        "format":   "sparsering-step-durations",   // optional; if present, exactly this
//        "unit":     "ns",                          // optional; if present, exactly "ns"
//        "forward":  [[ns of step 0, step 1, ...], ...],   // required
//        "backward": [[...], ...]                   // optional: adds the backward pass
//      }
//    Rows: one per global rank (world_size rows, row g = global rank g) or one per ring position
//    (context_parallel rows, applied to every context-parallel ring). Each row has
//    context_parallel entries: entry t = the kernel time of ring step t in ns (a number >= 0,
//    rounded to whole ns). Other keys are ignored.
//
// 2. The simulator's result (`sparsering simulate --out DIR` writes DIR/result.json, format
//    "sparsering-simulation"): every layer's forward and backward ring passes, "rings"[i] =
//    {layer, direction, ring_class, ranks: [{position, compute_ns: [per step]}]}, applied to every
//    ring of its ring class (ring_classes[c].rings). Its degrees must equal the plan's.
//
// Step t follows core/ring_schedule.hpp: its mixed-radix digits t_l over the ring levels say
// that at step t position p holds the K/V of the position with digits (i_l - t_l) mod s_l; for a
// flat ring, the K/V of position p - t. Tested in tests/tuner/step_durations_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/plan_config.hpp"

namespace sparsering {

/// Kernel times of one ring pass, [global rank][step], ns.
using StepMatrix = std::vector<std::vector<int64_t>>;

struct StepDurations {
  std::vector<StepMatrix> forward_ns;   ///< per layer (one entry for the step-durations schema)
  std::vector<StepMatrix> backward_ns;  ///< per layer; empty = no backward pass
};

/// Parses and checks durations for `plan` (either input above); rows per ring position are
/// expanded to every rank. Throws InputError prefixed with `source_name`, naming the key, row and
/// step of the first problem.
StepDurations parse_step_durations(const std::string& json_text, std::string_view source_name, const PlanConfig& plan);

/// Reads a durations file and parses it.
StepDurations load_step_durations(const std::string& path, const PlanConfig& plan);

}  // namespace sparsering
