#include "sim/output/result_json.hpp"

namespace sparsering {

nlohmann::json work_json(const WorkCounts& w) {
  return {{"tiles", w.tiles},
          {"masked_tiles", w.masked_tiles},
          {"columns", w.columns},
          {"column_chunks", w.column_chunks},
          {"lists", w.lists},
          {"key_lists", w.key_lists},
          {"column_lists", w.column_lists},
          {"column_items", w.column_items},
          {"longest_key_list", w.longest_key_list}};
}

namespace {

nlohmann::json phases_json(const std::vector<LayerPhase>& phases) {
  nlohmann::json out = nlohmann::json::array();
  for (const LayerPhase& p : phases) out.push_back({{"name", p.name}, {"ns", p.duration_ns}, {"communication", p.communication}});
  return out;
}

const char* transfer_kind(TransferKind kind) {
  switch (kind) {
    case TransferKind::kv: return "kv";
    case TransferKind::dkv: return "dkv";
    case TransferKind::dkv_return: return "dkv_return";
  }
  return "unknown";
}

nlohmann::json ring_json(const SimulationResult& result, const RingPassResult& pass) {
  const int32_t w = pass.run.ranks;
  const RingClass& cls = result.ring_classes[static_cast<size_t>(pass.ring_class)];
  nlohmann::json ranks = nlohmann::json::array();
  for (int32_t p = 0; p < w; ++p) {
    nlohmann::json compute_ns = nlohmann::json::array();
    nlohmann::json start = nlohmann::json::array();
    nlohmann::json end = nlohmann::json::array();
    nlohmann::json recv_start = nlohmann::json::array();
    nlohmann::json recv_end = nlohmann::json::array();
    nlohmann::json wait = nlohmann::json::array();
    nlohmann::json exposed = nlohmann::json::array();
    for (int32_t t = 0; t < w; ++t) {
      const RingStepRecord& rec = pass.run.at(p, t);
      compute_ns.push_back(pass.compute_ns[static_cast<size_t>(p) * static_cast<size_t>(w) + static_cast<size_t>(t)]);
      start.push_back(rec.compute_start_ns);
      end.push_back(rec.compute_end_ns);
      recv_start.push_back(rec.recv_start_ns);
      recv_end.push_back(rec.recv_end_ns);
      wait.push_back(rec.wait_ns);
      exposed.push_back(rec.comm_exposed);
    }
    ranks.push_back({{"position", p},
                     {"global_rank", cls.members[static_cast<size_t>(p)]},
                     {"finish_ns", pass.run.finish_ns[static_cast<size_t>(p)]},
                     {"compute_ns", compute_ns},
                     {"compute_start_ns", start},
                     {"compute_end_ns", end},
                     {"recv_start_ns", recv_start},
                     {"recv_end_ns", recv_end},
                     {"wait_ns", wait},
                     {"comm_exposed", exposed}});
  }
  nlohmann::json transfers = nlohmann::json::array();
  for (const RingTransfer& tr : pass.run.transfers) {
    transfers.push_back({transfer_kind(tr.kind), tr.from, tr.to, tr.step, tr.level, tr.start_ns, tr.end_ns});
  }
  return {{"layer", pass.layer},
          {"head_group", pass.head_group},
          {"direction", pass.backward ? "backward" : "forward"},
          {"ring_class", pass.ring_class},
          {"end_ns", pass.run.end_ns},
          {"worker_imbalance", pass.metrics.worker_imbalance},
          {"step_imbalance", pass.metrics.step_imbalance},
          {"mean_step_imbalance", pass.metrics.mean_step_imbalance},
          {"exposed_steps", pass.metrics.exposed_steps},
          {"exposed_share", pass.metrics.exposed_share},
          {"ranks", ranks},
          {"transfer_fields", {"kind", "from", "to", "step", "level", "start_ns", "end_ns"}},
          {"transfers", transfers}};
}

nlohmann::json shape_json(const KernelShape& s) {
  return {{"block_q", s.block_q}, {"block_k", s.block_k}, {"head_dim", s.head_dim}};
}

}  // namespace

nlohmann::json calibration_status_json(const CalibrationStatus& status) {
  nlohmann::json out = {{"source", status.source},
                        {"gpu", status.gpu},
                        {"this_kernel_build", status.this_kernel_build},
                        {"stale", status.stale},
                        {"shape", shape_json(status.shape)},
                        {"calibrated_shape", status.calibrated_shape ? shape_json(*status.calibrated_shape) : nlohmann::json()},
                        {"extrapolated", status.extrapolated}};
  if (status.measured()) out["kernel_build"] = status.kernel_build;
  if (status.sm_clock_mhz > 0.0) out["sm_clock_mhz"] = status.sm_clock_mhz;
  if (status.extrapolated) out["scaling"] = status.scaling;
  return out;
}

nlohmann::json result_summary_json(const SimulationResult& r) {
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerResult& l : r.layers) {
    layers.push_back({{"layer", l.layer},
                      {"attention_fwd_ns", l.attention_fwd_ns},
                      {"attention_bwd_ns", l.attention_bwd_ns},
                      {"forward_ns", l.forward_ns},
                      {"backward_ns", l.backward_ns},
                      {"forward_phases", phases_json(l.forward)},
                      {"backward_phases", phases_json(l.backward)},
                      {"work", work_json(l.work)},
                      {"worker_imbalance", l.worker_imbalance},
                      {"step_imbalance", l.step_imbalance},
                      {"exposed_share", l.exposed_share},
                      {"backward_exposed_share", l.backward_exposed_share}});
  }
  nlohmann::json memory_items = nlohmann::json::object();
  for (const MemoryItem& item : r.memory.items) memory_items[item.name] = item.bytes;
  nlohmann::json classes = nlohmann::json::array();
  for (const RingClass& c : r.ring_classes) {
    classes.push_back({{"head_group", c.head_group}, {"rings", c.rings}, {"members", c.members}});
  }
  return {{"format", "sparsering-simulation"},
          {"version", 1},
          {"plan", r.plan_name},
          {"model", r.model_name},
          {"cluster", r.cluster_name},
          {"gpu", r.gpu_name},
          {"dense", r.dense},
          {"calibrated", r.calibrated},
          {"cost_source", r.cost_source},
          {"calibration", calibration_status_json(r.calibration)},
          {"notes", r.notes},
          {"parallel",
           {{"context_parallel", r.context_parallel},
            {"head_parallel", r.head_parallel},
            {"data_parallel", r.data_parallel},
            {"ring_levels", r.ring_levels},
            {"layout", r.layout},
            {"heads_per_group", r.heads_per_group}}},
          {"step",
           {{"step_ns", r.step.step_ns},
            {"forward_ns", r.step.forward_ns},
            {"backward_ns", r.step.backward_ns},
            {"lm_head_ns", r.step.lm_head_ns},
            {"grad_sync_ns", r.step.grad_sync_ns},
            {"grad_sync_exposed_ns", r.step.grad_sync_exposed_ns},
            {"optimizer_ns", r.step.optimizer_ns},
            {"tokens_per_step", r.step.tokens_per_step},
            {"tokens_per_s", r.step.tokens_per_s}}},
          {"figures",
           {{"worker_imbalance", r.worker_imbalance},
            {"step_imbalance", r.step_imbalance},
            {"exposed_share", r.exposed_share}}},
          {"memory",
           {{"items_bytes", memory_items},
            {"peak_bytes", r.memory.peak_bytes},
            {"capacity_bytes", r.memory.capacity_bytes},
            {"fits", r.memory.fits},
            {"reason", r.memory.reason}}},
          {"ring_classes", classes},
          {"layers", layers}};
}

nlohmann::json result_to_json(const SimulationResult& result) {
  nlohmann::json out = result_summary_json(result);
  nlohmann::json rings = nlohmann::json::array();
  for (const RingPassResult& pass : result.rings) rings.push_back(ring_json(result, pass));
  out["rings"] = std::move(rings);
  return out;
}

}  // namespace sparsering
