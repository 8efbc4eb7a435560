// The bridge between a validation and the NCCL ring runtime (kernels/nccl/ring_attention_layer.hpp):
// the runtime's problem made from the validated layer, and the runtime's measurement (indexed by
// global rank) turned into the measured layer (indexed by ring position) that the comparison
// reads. Plain C++ over the runtime's plain structs, so it builds and is tested without GPUs
// (tests/measure/validation/validation_compare_test.cpp).
//
// Transfer times: the runtime reports, per (rank, step), the compute time, the step time and the
// wait for K/V before the compute. A chunk is posted when the previous compute starts (double
// buffering), so a positive wait w(t) means the transfer took compute(t-1) + w(t); with no wait it
// was hidden and is recorded as 0 (at most compute(t-1)). The step-overlap ratio uses this.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/nccl/ring_attention_layer.hpp"
#include "measure/validation/measured_layer.hpp"
#include "measure/validation/validation_problem.hpp"

namespace sparsering {

/// The runtime's problem for the validated layer: the ring's layout and levels, `ring_order`
/// (position -> global rank, a permutation of 0 .. W-1), the per-rank shape, the kept sets (or
/// dense), backward on, one untimed warm-up and `iterations` timed repetitions.
RingLayerProblem make_ring_layer_problem(const ValidationProblem& problem, const std::vector<int32_t>& ring_order,
                                         int32_t iterations, uint64_t seed = 1);

/// The ring order of the validated ring: the plan's first ring when its members are exactly
/// 0 .. W-1, else the identity (the first W GPUs of the host). `plan` must match `problem`.
std::vector<int32_t> validation_ring_order(const PlanConfig& plan);

/// The measurement by ring position: [g x W + t] -> [p x W + t] with g = ring_order[p],
/// milliseconds -> microseconds, inferred transfer times (file comment) and start times for the
/// timeline. Throws InputError when the sizes do not match W.
MeasuredLayer measured_from_ring(const RingLayerMeasurement& measurement, const std::vector<int32_t>& ring_order,
                                 int32_t iterations);

}  // namespace sparsering
