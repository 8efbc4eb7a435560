// The human summary of a simulation. Names come from user files (plan, model, cluster, GPU), so
// every user-controlled string goes through escape_for_terminal before it is printed.
#include "sim/output/summary_table.hpp"

#include <string>

#include "common/table.hpp"
#include "common/text_safety.hpp"

namespace sparsering {

namespace {

std::string ms(SimNs ns) { return fixed(ns_to_ms(ns), 3); }
std::string safe(const std::string& text) { return escape_for_terminal(text); }
std::string gib(int64_t bytes) { return fixed(static_cast<double>(bytes) / static_cast<double>(int64_t{1} << 30), 2); }

}  // namespace

void print_summary(std::ostream& out, const SimulationResult& r) {
  out << "plan " << (r.plan_name.empty() ? "(unnamed)" : safe(r.plan_name)) << ": model " << safe(r.model_name)
      << ", cluster " << safe(r.cluster_name) << " (" << safe(r.gpu_name) << ")\n";
  out << "parallel: context " << r.context_parallel << " x head " << r.head_parallel << " x data " << r.data_parallel
      << ", ring levels";
  for (const int64_t size : r.ring_levels) out << " " << size;
  out << ", layout " << safe(r.layout) << (r.dense ? ", dense attention" : ", sparse attention") << "\n";
  out << "kernel costs: " << safe(r.cost_source) << (r.calibrated ? "" : "  [UNCALIBRATED]")
      << (r.calibration.published() ? "  [PUBLISHED FIGURES]" : "") << (r.calibration.stale ? "  [STALE CALIBRATION]" : "")
      << (r.calibration.extrapolated ? "  [EXTRAPOLATED SHAPE]" : "") << "\n\n";

  Table step({"step", "ms"});
  step.add_row({"forward (layers + LM head)", ms(r.step.forward_ns)});
  step.add_row({"backward", ms(r.step.backward_ns)});
  step.add_row({"gradient sync, exposed", ms(r.step.grad_sync_exposed_ns)});
  step.add_row({"optimizer", ms(r.step.optimizer_ns)});
  step.add_row({"training step", ms(r.step.step_ns)});
  step.print(out);
  out << "tokens/s: " << fixed(r.step.tokens_per_s, 0) << " (" << r.step.tokens_per_step << " tokens per step)\n";
  out << "worker imbalance " << fixed(r.worker_imbalance, 3) << ", step imbalance " << fixed(r.step_imbalance, 3)
      << ", comm-exposed steps " << fixed(100.0 * r.exposed_share, 1) << "%\n\n";

  Table layers({"layer", "attn fwd ms", "attn bwd ms", "layer fwd ms", "layer bwd ms", "worker imb", "step imb", "exposed %"});
  for (const LayerResult& l : r.layers) {
    layers.add_row({std::to_string(l.layer), ms(l.attention_fwd_ns), ms(l.attention_bwd_ns), ms(l.forward_ns),
                    ms(l.backward_ns), fixed(l.worker_imbalance, 3), fixed(l.step_imbalance, 3),
                    fixed(100.0 * l.exposed_share, 1)});
  }
  layers.print(out);
  out << "\n";

  Table memory({"memory per GPU", "GiB"});
  for (const MemoryItem& item : r.memory.items) memory.add_row({item.name, gib(item.bytes)});
  memory.add_row({"peak", gib(r.memory.peak_bytes)});
  memory.add_row({"capacity", gib(r.memory.capacity_bytes)});
  memory.print(out);
  out << (r.memory.fits ? "fits\n" : "DOES NOT FIT: " + safe(r.memory.reason) + "\n");
  if (!r.notes.empty()) {
    out << "\nnotes:\n";
    for (const std::string& note : r.notes) out << "  - " << safe(note) << "\n";
  }
}

}  // namespace sparsering
