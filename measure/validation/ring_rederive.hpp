// Re-running the simulator's ring schedule with other kernel times: the link inputs of a simulated
// pass (every K/V forward and dK/dV hop duration) are recovered from the pass's transfer records,
// and the event model (sim/ring/ring_simulation.hpp) runs again with a measured compute matrix.
// This is how `sparsering validate --replay` turns the compute matrix measured on one GPU into the
// per-layer attention time the simulator derives from it. Tested in
// tests/measure/validation/ring_rederive_test.cpp (random rings, both routes: recovering and re-running
// with the same compute reproduces the pass exactly).
#pragma once

#include <vector>

#include "sim/core/sim_time.hpp"
#include "core/ring_schedule.hpp"
#include "sim/ring/ring_simulation.hpp"

namespace sparsering {

/// The RingInput whose simulation produced `run`, less its compute times (left empty) and
/// per-position start times (all 0, as the simulator starts every pass). Every transfer of the
/// run gives the duration of its hop; hops that never happened stay 0. Throws InputError when the
/// run does not match the schedule (ranks, positions, steps or levels out of range).
RingInput recover_ring_input(const RingSchedule& schedule, const RingRun& run, bool backward, AccumulatorRoute route);

/// Simulates the pass of `predicted` again with `compute_ns` ([position x W + step], >= 0) in place
/// of its kernel times, keeping every link time. Throws InputError for a size mismatch.
RingRun resimulate_ring(const RingSchedule& schedule, const RingRun& predicted, bool backward, AccumulatorRoute route,
                        std::vector<SimNs> compute_ns);

}  // namespace sparsering
