// Recovers a pass's link inputs from its transfer records (see ring_rederive.hpp). The event model
// records one RingTransfer per hop with the sender, the sender's step and the level whose queue it
// used, and each hop occupies its link for exactly its input duration (end - start), so the
// records determine the inputs of every hop that happened.
#include "measure/validation/ring_rederive.hpp"

#include "common/error.hpp"

namespace sparsering {

RingInput recover_ring_input(const RingSchedule& schedule, const RingRun& run, bool backward, AccumulatorRoute route) {
  const int32_t w = schedule.ranks();
  const int32_t levels = schedule.levels();
  require(run.ranks == w, "the simulated pass has ", run.ranks, " positions, the schedule ", w);
  const auto ww = static_cast<size_t>(w);
  const auto ll = static_cast<size_t>(levels);
  RingInput input;
  input.route = route;
  input.kv_send_ns.assign(ww * ww * ll, 0);
  if (backward) {
    if (route == AccumulatorRoute::mirror) {
      input.dkv_hop_ns.assign(ww * ww * ll, 0);
    } else {
      input.dkv_send_ns.assign(ww * ww, 0);
      input.dkv_level.assign(ww * ww, 0);
    }
  }
  for (const RingTransfer& transfer : run.transfers) {
    require(transfer.from >= 0 && transfer.from < w && transfer.step >= 0 && transfer.step < w &&
                transfer.level >= 0 && transfer.level < levels && transfer.end_ns >= transfer.start_ns,
            "transfer (from ", transfer.from, ", step ", transfer.step, ", level ", transfer.level,
            ") does not fit a ring of ", w, " positions and ", levels, " levels");
    const size_t cell = static_cast<size_t>(transfer.from) * ww + static_cast<size_t>(transfer.step);
    const SimNs duration = transfer.end_ns - transfer.start_ns;
    if (transfer.kind == TransferKind::kv) {
      input.kv_send_ns[cell * ll + static_cast<size_t>(transfer.level)] = duration;
    } else {
      require(backward, "a forward pass has a dK/dV transfer (from ", transfer.from, ", step ", transfer.step, ")");
      if (route == AccumulatorRoute::mirror) {
        input.dkv_hop_ns[cell * ll + static_cast<size_t>(transfer.level)] = duration;
      } else {
        input.dkv_send_ns[cell] = duration;
        input.dkv_level[cell] = transfer.level;
      }
    }
  }
  return input;
}

RingRun resimulate_ring(const RingSchedule& schedule, const RingRun& predicted, bool backward, AccumulatorRoute route,
                        std::vector<SimNs> compute_ns) {
  const auto ww = static_cast<size_t>(schedule.ranks());
  require(compute_ns.size() == ww * ww, "the compute matrix has ", compute_ns.size(), " cells, a ring of ",
          schedule.ranks(), " needs ", ww * ww);
  RingInput input = recover_ring_input(schedule, predicted, backward, route);
  input.compute_ns = std::move(compute_ns);
  return simulate_ring(schedule, input, backward);
}

}  // namespace sparsering
