#include "sim/output/timeline_json.hpp"

#include <algorithm>
#include <map>
#include <tuple>
#include <string>

namespace sparsering {

namespace {

constexpr int kCompute = 0;
constexpr int kSend = 1;
constexpr int kRecv = 2;

class Builder {
 public:
  explicit Builder(int64_t max_events) : budget_(max_events) {}

  void event(const std::string& name, int64_t rank, int track, SimNs start, SimNs duration, nlohmann::json args = {}) {
    if (duration <= 0) return;
    nlohmann::json e = {{"name", name}, {"ph", "X"}, {"pid", rank}, {"tid", track},
                        {"ts", static_cast<double>(start) * 1e-3}, {"dur", static_cast<double>(duration) * 1e-3}};
    if (!args.is_null()) e["args"] = std::move(args);
    events_.push_back(std::move(e));
    ++count_;
  }
  bool can_afford(int64_t events) const { return count_ + events <= budget_; }
  nlohmann::json& events() { return events_; }

 private:
  nlohmann::json events_ = nlohmann::json::array();
  int64_t count_ = 0;
  int64_t budget_;
};

const char* kind_name(TransferKind kind) {
  switch (kind) {
    case TransferKind::kv: return "kv";
    case TransferKind::dkv: return "dkv";
    case TransferKind::dkv_return: return "dkv_return";
  }
  return "transfer";
}

}  // namespace

nlohmann::json timeline_json(const SimulationResult& result, const TimelineOptions& options) {
  Builder b(options.max_events);
  std::vector<int64_t> ranks;
  for (const RingClass& cls : result.ring_classes) {
    for (const auto& ring : cls.ring_members) ranks.insert(ranks.end(), ring.begin(), ring.end());
  }
  std::sort(ranks.begin(), ranks.end());
  // Ring passes by (layer, class, direction).
  std::map<std::tuple<int64_t, int32_t, bool>, const RingPassResult*> passes;
  for (const RingPassResult& pass : result.rings) passes[{pass.layer, pass.ring_class, pass.backward}] = &pass;
  int64_t coarse_from_layer = -1;

  SimNs cursor = 0;
  const auto coarse = [&](const LayerPhase& phase, int64_t layer) {
    for (const int64_t g : ranks) {
      const nlohmann::json args = {{"layer", layer}};
      if (phase.communication) {
        b.event(phase.name, g, kSend, cursor, phase.duration_ns, args);
        b.event(phase.name, g, kRecv, cursor, phase.duration_ns, args);
      } else {
        b.event(phase.name, g, kCompute, cursor, phase.duration_ns, args);
      }
    }
  };
  const auto ring_phase = [&](const LayerPhase& phase, int64_t layer, bool backward) {
    // Estimate the detail's size: W^2 kernels and the transfers, on every ring of every class.
    int64_t needed = 0;
    for (size_t c = 0; c < result.ring_classes.size(); ++c) {
      const auto it = passes.find({layer, static_cast<int32_t>(c), backward});
      if (it == passes.end()) {
        needed = -1;
        break;
      }
      const auto rings = static_cast<int64_t>(result.ring_classes[c].ring_members.size());
      needed += rings * (static_cast<int64_t>(it->second->run.steps.size()) + 2 * static_cast<int64_t>(it->second->run.transfers.size()));
    }
    if (needed < 0 || !b.can_afford(needed)) {
      if (coarse_from_layer < 0 || layer < coarse_from_layer) coarse_from_layer = layer;
      coarse(phase, layer);
      return;
    }
    for (size_t c = 0; c < result.ring_classes.size(); ++c) {
      const RingPassResult& pass = *passes.at({layer, static_cast<int32_t>(c), backward});
      const int32_t w = pass.run.ranks;
      for (const auto& ring : result.ring_classes[c].ring_members) {
        for (int32_t p = 0; p < w; ++p) {
          for (int32_t t = 0; t < w; ++t) {
            const RingStepRecord& rec = pass.run.at(p, t);
            b.event(backward ? "attn_bwd" : "attn_fwd", ring[static_cast<size_t>(p)], kCompute, cursor + rec.compute_start_ns,
                    rec.compute_end_ns - rec.compute_start_ns,
                    {{"layer", layer}, {"step", t}, {"wait_ns", rec.wait_ns}, {"comm_exposed", rec.comm_exposed}});
          }
        }
        for (const RingTransfer& tr : pass.run.transfers) {
          const nlohmann::json args = {{"layer", layer}, {"step", tr.step}, {"level", tr.level},
                                       {"from", ring[static_cast<size_t>(tr.from)]}, {"to", ring[static_cast<size_t>(tr.to)]}};
          b.event(kind_name(tr.kind), ring[static_cast<size_t>(tr.from)], kSend, cursor + tr.start_ns, tr.end_ns - tr.start_ns, args);
          b.event(kind_name(tr.kind), ring[static_cast<size_t>(tr.to)], kRecv, cursor + tr.start_ns, tr.end_ns - tr.start_ns, args);
        }
      }
    }
  };

  for (const LayerResult& layer : result.layers) {
    for (const LayerPhase& phase : layer.forward) {
      if (phase.name == "attention_ring") {
        ring_phase(phase, layer.layer, false);
      } else {
        coarse(phase, layer.layer);
      }
      cursor += phase.duration_ns;
    }
  }
  const LayerPhase lm_head{"lm_head", result.step.lm_head_ns, false};
  coarse(lm_head, -1);
  cursor += lm_head.duration_ns;
  for (auto it = result.layers.rbegin(); it != result.layers.rend(); ++it) {
    for (const LayerPhase& phase : it->backward) {
      if (phase.name == "attention_ring_bwd") {
        ring_phase(phase, it->layer, true);
      } else {
        coarse(phase, it->layer);
      }
      cursor += phase.duration_ns;
    }
  }
  const LayerPhase sync{"grad_sync_exposed", result.step.grad_sync_exposed_ns, true};
  coarse(sync, -1);
  cursor += sync.duration_ns;
  const LayerPhase optimizer{"optimizer", result.step.optimizer_ns, false};
  coarse(optimizer, -1);

  nlohmann::json& events = b.events();
  for (const int64_t g : ranks) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", g}, {"args", {{"name", "rank " + std::to_string(g)}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", g}, {"args", {{"sort_index", g}}}});
    const char* names[] = {"compute", "send", "recv"};
    for (int track = 0; track < 3; ++track) {
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", g}, {"tid", track}, {"args", {{"name", names[track]}}}});
    }
  }
  nlohmann::json other = {{"plan", result.plan_name}, {"step_ns", result.step.step_ns}, {"calibrated", result.calibrated}};
  if (coarse_from_layer >= 0) other["ring_detail_note"] = "some ring passes drawn as one event per rank (event budget or records not kept)";
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}, {"otherData", other}};
}

}  // namespace sparsering
