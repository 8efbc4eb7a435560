#include "sim/cost/kernel_cost.hpp"

#include "common/error.hpp"

namespace sparsering {

AttentionCostModel make_attention_cost_model(const GpuConfig& gpu, int64_t block_q, int64_t block_k, int64_t head_dim,
                                             const RooflineAssumptions& assumptions) {
  require(block_q >= 1 && block_k >= 1 && head_dim >= 1, "attention cost model needs block_q, block_k, head_dim >= 1, got ",
          block_q, ", ", block_k, ", ", head_dim);
  AttentionCostModel model;
  const double tile_work = static_cast<double>(block_q) * static_cast<double>(block_k) * static_cast<double>(head_dim);
  if (gpu.calibration.has_value()) {
    const GpuCalibration& cal = *gpu.calibration;
    const auto copy = [](const KernelCostCoefficients& from) {
      return KernelCoefficients{.launch_us = from.launch_us,
                                .per_tile_us = from.per_tile_us,
                                .per_vertical_chunk_us = from.per_vertical_chunk_us};
    };
    model.forward = copy(cal.forward);
    model.backward = copy(cal.backward);
    model.calibrated = true;
    model.source = str("calibration (", gpu.name, cal.provenance.date.empty() ? "" : ", ", cal.provenance.date, ")");
    const double cal_work = static_cast<double>(cal.block_q) * static_cast<double>(cal.block_k) * static_cast<double>(cal.head_dim);
    if (cal_work > 0.0 && (cal.block_q != block_q || cal.block_k != block_k || cal.head_dim != head_dim)) {
      const double scale = tile_work / cal_work;
      for (KernelCoefficients* c : {&model.forward, &model.backward}) {
        c->per_tile_us *= scale;
        c->per_vertical_chunk_us *= scale;
      }
      model.notes.push_back(str("calibration measured block_q=", cal.block_q, " block_k=", cal.block_k, " head_dim=",
                                cal.head_dim, "; tile costs scaled by ", scale, " for block_q=", block_q,
                                " block_k=", block_k, " head_dim=", head_dim));
    }
    return model;
  }
  require(gpu.peak_tflops_bf16 > 0.0, "GPU '", gpu.name, "' has no peak_tflops_bf16 for the roofline cost model");
  require(assumptions.attention_efficiency > 0.0 && assumptions.attention_efficiency <= 1.0,
          "roofline attention efficiency must be in (0, 1], got ", assumptions.attention_efficiency);
  const double rate_flop_per_us = gpu.peak_tflops_bf16 * 1e6 * assumptions.attention_efficiency;
  const double tile_us = 4.0 * tile_work / rate_flop_per_us;
  model.forward = KernelCoefficients{.launch_us = assumptions.launch_us,
                                     .per_tile_us = tile_us,
                                     .per_vertical_chunk_us = tile_us * assumptions.gather_slowdown};
  model.backward = KernelCoefficients{.launch_us = assumptions.launch_us,
                                      .per_tile_us = tile_us * assumptions.backward_flop_ratio,
                                      .per_vertical_chunk_us =
                                          tile_us * assumptions.gather_slowdown * assumptions.backward_flop_ratio};
  model.calibrated = false;
  model.source = "roofline (uncalibrated)";
  model.notes.push_back(str("uncalibrated: ", gpu.name, " has no calibration section; roofline at ",
                            assumptions.attention_efficiency, " of ", gpu.peak_tflops_bf16,
                            " TFLOP/s bf16, launch ", assumptions.launch_us,
                            " us, no cost per (head, query block) list (nothing measured to set it)"));
  return model;
}

SimNs kernel_time_ns(const KernelCoefficients& c, const WorkCounts& work, int64_t heads) {
  if (work.tiles == 0 && work.column_chunks == 0) return 0;
  return ns_from_us(c.launch_us + c.per_list_us * static_cast<double>(work.lists) +
                    c.per_tile_us * static_cast<double>(work.tiles) +
                    c.per_vertical_chunk_us * static_cast<double>(work.column_chunks) +
                    c.per_head_us * static_cast<double>(heads));
}

GemmCostModel make_gemm_cost_model(const GpuConfig& gpu, const RooflineAssumptions& assumptions) {
  require(gpu.peak_tflops_bf16 > 0.0, "GPU '", gpu.name, "' has no peak_tflops_bf16 for the GEMM cost model");
  GemmCostModel model;
  if (gpu.calibration.has_value() && gpu.calibration->gemm_efficiency > 0.0) {
    model.effective_tflops = gpu.peak_tflops_bf16 * gpu.calibration->gemm_efficiency;
    model.calibrated = true;
  } else {
    require(assumptions.gemm_efficiency > 0.0 && assumptions.gemm_efficiency <= 1.0,
            "assumed GEMM efficiency must be in (0, 1], got ", assumptions.gemm_efficiency);
    model.effective_tflops = gpu.peak_tflops_bf16 * assumptions.gemm_efficiency;
  }
  return model;
}

SimNs gemm_time_ns(const GemmCostModel& model, double flops) {
  require(flops >= 0.0, "GEMM FLOPs must be >= 0, got ", flops);
  return round_to_ns(flops / (model.effective_tflops * 1e3));  // TFLOP/s = 1e3 FLOP per ns
}

SimNs index_build_time_ns(const RooflineAssumptions& assumptions, int64_t heads, int64_t local_tokens) {
  require(heads >= 0 && local_tokens >= 0, "index build of ", heads, " heads x ", local_tokens, " tokens");
  require(assumptions.index_build_launch_us >= 0.0 && assumptions.index_build_per_head_ktoken_us >= 0.0,
          "index build coefficients must be >= 0, got ", assumptions.index_build_launch_us, " us and ",
          assumptions.index_build_per_head_ktoken_us, " us per head-ktoken");
  if (heads == 0 || local_tokens == 0) return 0;
  const double head_ktokens = static_cast<double>(heads) * static_cast<double>(local_tokens) / 1024.0;
  return ns_from_us(assumptions.index_build_launch_us + assumptions.index_build_per_head_ktoken_us * head_ktokens);
}

}  // namespace sparsering
