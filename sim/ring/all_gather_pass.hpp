// The all-gather alternative to the K/V ring (plan `comm: all_gather`, Megatron's
// `--cp-comm-type all_gather`): every rank gathers the K/V of all ranks of the context-parallel
// group first, then computes the chunks one after another without waiting; backward computes on
// the gathered K/V (kept from forward) and reduce-scatters dK/dV to their owners at the end.
// Produces the same RingRun records as the ring simulation so outputs and metrics are shared:
// every chunk "arrives" when the gather ends. Tested in tests/sim/ring_simulation_test.cpp.
#pragma once

#include <vector>

#include "sim/core/sim_time.hpp"
#include "sim/ring/ring_simulation.hpp"

namespace sparsering {

/// Runs one pass over `ranks` positions: compute_ns[p x W + t] is position p's kernel time on the
/// chunk of its step t (same step order as a ring, so work is identical). `gather_ns` is the
/// all-gather before compute; `scatter_ns` (backward only, else 0) the reduce-scatter after it.
/// Throws InputError for mismatched sizes or negative times.
RingRun simulate_all_gather_pass(int32_t ranks, const std::vector<SimNs>& compute_ns, SimNs gather_ns, SimNs scatter_ns);

}  // namespace sparsering
