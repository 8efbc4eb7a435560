// The simulated training step as a Chrome / Perfetto trace-event JSON (opens in ui.perfetto.dev):
// one process per global rank with three tracks, compute, send and recv. Every layer phase is an
// event; ring passes show each (rank, step) kernel on the compute track and each K/V or dK/dV
// transfer on the sender's send track and the receiver's recv track, up to an event budget after
// which ring passes are drawn as one event per rank (the metadata says from which layer on).
// Tested in tests/sim/output_test.cpp.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "sim/step/simulation.hpp"

namespace sparsering {

struct TimelineOptions {
  int64_t max_events = 2000000;  ///< detail budget (events); coarse events beyond it
};

/// Builds the trace-event document. Times in microseconds as the format wants (ts, dur).
nlohmann::json timeline_json(const SimulationResult& result, const TimelineOptions& options = {});

}  // namespace sparsering
