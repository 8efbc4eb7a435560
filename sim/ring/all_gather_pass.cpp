#include "sim/ring/all_gather_pass.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace sparsering {

RingRun simulate_all_gather_pass(int32_t ranks, const std::vector<SimNs>& compute_ns, SimNs gather_ns, SimNs scatter_ns) {
  require(ranks >= 1, "all-gather pass needs >= 1 rank, got ", ranks);
  const auto w = static_cast<size_t>(ranks);
  require(compute_ns.size() == w * w, "all-gather pass: compute_ns has ", compute_ns.size(), " entries, expected ", w * w);
  require(gather_ns >= 0 && scatter_ns >= 0, "all-gather pass: negative collective time");
  RingRun run;
  run.ranks = ranks;
  run.steps.resize(w * w);
  run.finish_ns.assign(w, 0);
  for (size_t p = 0; p < w; ++p) {
    SimNs clock = 0;
    for (size_t t = 0; t < w; ++t) {
      RingStepRecord& rec = run.steps[p * w + t];
      const SimNs previous = clock;
      const SimNs arrival = t == 0 ? 0 : gather_ns;  // own chunk at once, the others after the gather
      rec.compute_start_ns = std::max(previous, arrival);
      require(compute_ns[p * w + t] >= 0, "all-gather pass: negative compute time");
      rec.compute_end_ns = rec.compute_start_ns + compute_ns[p * w + t];
      rec.recv_start_ns = 0;
      rec.recv_end_ns = t == 0 ? 0 : gather_ns;
      rec.wait_ns = rec.compute_start_ns - previous;
      rec.comm_exposed = t >= 1 && arrival > previous;
      clock = rec.compute_end_ns;
    }
    run.finish_ns[p] = clock;
  }
  // The reduce-scatter of dK/dV (backward) starts when every rank is done.
  const SimNs compute_end = *std::max_element(run.finish_ns.begin(), run.finish_ns.end());
  if (scatter_ns > 0) {
    for (SimNs& finish : run.finish_ns) finish = compute_end + scatter_ns;
  }
  run.end_ns = compute_end + scatter_ns;
  return run;
}

}  // namespace sparsering
