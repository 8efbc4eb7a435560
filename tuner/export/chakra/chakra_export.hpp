// Export to a Chakra execution trace (ASTRA-sim input): chakra/trace.<rank>.et per global rank,
// each a length-delimited protobuf stream (GlobalMetadata, then nodes; see chakra_stream.hpp),
// and chakra/comm_group.json (ASTRA-sim --comm-group-configuration). Per attention layer and pass
// a rank has one COMP node per ring step (duration from the simulator's step durations) and
// COMM_SEND / COMM_RECV nodes per K/V hop (and per dK/dV hop in the backward pass), scheduled as
// core/ring_schedule.hpp and sim/ring/ring_simulation.hpp describe:
//   - step t's COMP depends on the RECV of step t's K/V and on COMP t-1;
//   - K/V is forwarded (SEND) once it arrived, over every level the schedule says, outermost
//     first, so a hierarchical ring posts the outer hop before the whole inner ring;
//   - the RECV of step t is posted after COMP t-1 and after this rank's sends of step t-1 (the
//     double buffer; it also keeps simulators that run one transfer at a time per rank free of
//     deadlock);
//   - backward: the dK/dV accumulator of step t leaves after COMP t and after the incoming
//     accumulator arrived, to the inner successor, or at the last inner step back to the chunk's
//     owner, which receives it at the end of the pass.
// Tested in tests/tuner/chakra_export_test.cpp (parsed back with the generated classes).
#pragma once

#include <cstdint>
#include <vector>

#include "tuner/export/chakra/step_durations.hpp"
#include "tuner/export/export_bundle.hpp"
#include "tuner/export/export_target.hpp"

namespace sparsering {

/// Bytes of one K/V hop of one layer: 2 (K and V) x local tokens x micro-batch sequences x KV heads
/// per rank (kv_heads / head_parallel, at least 1) x head_dim x bytes_per_param.
int64_t kv_hop_bytes(const PlanConfig& plan, const ModelConfig& model);

/// Bytes of one dK/dV accumulator hop: as kv_hop_bytes with 4-byte (fp32) elements, because the
/// accumulators are kept in fp32 across ring steps (docs/method.md section 6, defect 5).
int64_t dkv_hop_bytes(const PlanConfig& plan, const ModelConfig& model);

/// Builds the Chakra export. `layers` attention layers are chained: forward 0 .. layers-1, then,
/// when the durations have a backward pass, backward layers-1 .. 0. layers = 0 takes every layer
/// of the durations; durations of one layer are repeated for every layer. Throws InputError for a
/// plan that fails check_export_input, durations whose shape does not match the plan or that hold
/// fewer layers than asked, or a trace whose message tags would not fit in 31 bits.
ExportBundle export_chakra(const ExportInput& input, const StepDurations& durations, int64_t layers);

}  // namespace sparsering
