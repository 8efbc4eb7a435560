#include "sim/cost/kernel_cost.hpp"

#include <cmath>

#include "common/error.hpp"
#include "core/kernel_build.hpp"

namespace sparsering {

namespace {

/// The calibrated shape nearest to `wanted`: same head dim first, then the smallest sum of |log2|
/// ratios of the three sizes, then the first listed.
const CalibratedShape& nearest_shape(const GpuCalibration& cal, const KernelShape& wanted) {
  const auto distance = [&](const KernelShape& s) {
    return std::abs(std::log2(static_cast<double>(s.block_q) / static_cast<double>(wanted.block_q))) +
           std::abs(std::log2(static_cast<double>(s.block_k) / static_cast<double>(wanted.block_k))) +
           std::abs(std::log2(static_cast<double>(s.head_dim) / static_cast<double>(wanted.head_dim)));
  };
  const CalibratedShape* best = &cal.shapes.front();
  for (const CalibratedShape& s : cal.shapes) {
    const bool same_dim = s.shape.head_dim == wanted.head_dim;
    const bool best_same_dim = best->shape.head_dim == wanted.head_dim;
    if (same_dim != best_same_dim ? same_dim : distance(s.shape) < distance(best->shape)) best = &s;
  }
  return *best;
}

/// Scaling of a calibrated shape's costs to another shape (make_attention_cost_model).
struct ShapeScaling {
  double tile = 1.0;      ///< block_q x block_k x head_dim
  double list = 1.0;      ///< block_q x head_dim: a query block loaded, an output merged
  double key_list = 1.0;  ///< block_k x head_dim: a key block loaded, its dK/dV written
  double item = 1.0;      ///< head_dim: a column item is a 64 x 64 step at any block shape
  double key_block = 1.0; ///< block_k: the 64-key CTAs the key-block pass launches per key block
};

KernelCoefficients scaled(const KernelCostCoefficients& from, const ShapeScaling& s) {
  return KernelCoefficients{.launch_us = from.launch_us,
                            .per_list_us = from.per_list_us * s.list,
                            .per_tile_us = from.per_tile_us * s.tile,
                            .per_vertical_chunk_us = from.per_vertical_chunk_us * s.tile,
                            .per_head_us = 0.0,
                            .per_key_list_us = from.per_key_list_us * s.key_list,
                            .per_column_list_us = from.per_column_list_us * s.list,
                            .per_column_item_us = from.per_column_item_us * s.item,
                            .per_column_us = from.per_column_us * s.item,
                            .per_key_block_us = from.per_key_block_us * s.key_block,
                            .per_critical_entry_us = from.per_critical_entry_us * s.tile};
}

double product(const KernelShape& s) {
  return static_cast<double>(s.block_q) * static_cast<double>(s.block_k) * static_cast<double>(s.head_dim);
}

}  // namespace

AttentionCostModel make_attention_cost_model(const GpuConfig& gpu, int64_t block_q, int64_t block_k, int64_t head_dim,
                                             const RooflineAssumptions& assumptions) {
  require(block_q >= 1 && block_k >= 1 && head_dim >= 1, "attention cost model needs block_q, block_k, head_dim >= 1, got ",
          block_q, ", ", block_k, ", ", head_dim);
  AttentionCostModel model;
  model.calibration = kernel_build_status(gpu, this_kernel_build());
  const KernelShape wanted{block_q, block_k, head_dim};
  model.calibration.shape = wanted;
  if (gpu.calibration.has_value() && !gpu.calibration->shapes.empty()) {
    const GpuCalibration& cal = *gpu.calibration;
    const CalibratedShape& used = nearest_shape(cal, wanted);
    const double tile_scale = product(wanted) / product(used.shape);
    const double list_scale = static_cast<double>(block_q * head_dim) /
                              static_cast<double>(used.shape.block_q * used.shape.head_dim);
    const ShapeScaling scaling{.tile = tile_scale,
                               .list = list_scale,
                               .key_list = static_cast<double>(block_k * head_dim) /
                                           static_cast<double>(used.shape.block_k * used.shape.head_dim),
                               .item = static_cast<double>(head_dim) / static_cast<double>(used.shape.head_dim),
                               .key_block = static_cast<double>(block_k) / static_cast<double>(used.shape.block_k)};
    model.forward = scaled(used.forward, scaling);
    model.backward = scaled(used.backward, scaling);
    for (KernelCoefficients* c : {&model.forward, &model.backward}) {
      require(c->per_critical_entry_us == 0.0 || gpu.sm_count >= 1, "GPU '", gpu.name,
              "' has a critical-path cost (per_critical_entry_us) but no sm_count to share the tiles over");
      c->sm_count = gpu.sm_count;
    }
    model.calibrated = true;
    model.calibration.calibrated_shape = used.shape;
    model.calibration.extrapolated = !(used.shape == wanted);
    if (model.calibration.extrapolated) {
      model.calibration.scaling = str("scaled: per-tile and per-chunk costs x", tile_scale, " (tile FLOPs), per-list x",
                                      list_scale, " (query block x head dim), launch cost unchanged");
      const KernelCostCoefficients& b = used.backward;
      if (b.per_key_list_us > 0.0 || b.per_column_list_us > 0.0 || b.per_column_item_us > 0.0 || b.per_column_us > 0.0) {
        model.calibration.scaling += str("; backward per key list x", scaling.key_list, " (key block x head dim), per column list x",
                                         scaling.list, ", per column item and column x", scaling.item, " (head dim)");
      }
      if (b.per_key_block_us > 0.0) {
        model.calibration.scaling += str("; backward per key block of the chunk x", scaling.key_block, " (key block)");
      }
      if (b.per_critical_entry_us > 0.0) {
        model.calibration.scaling += str("; backward per critical entry x", scaling.tile, " (tile FLOPs)");
      }
    }
    model.source = cal.published() ? str("published figures (", gpu.name, ")")
                                   : str("calibration (", gpu.name, cal.provenance.date.empty() ? "" : ", ",
                                         cal.provenance.date, ")");
    model.notes = calibration_notes(model.calibration);
    return model;
  }
  require(gpu.peak_tflops_bf16 > 0.0, "GPU '", gpu.name, "' has no peak_tflops_bf16 for the roofline cost model");
  require(assumptions.attention_efficiency > 0.0 && assumptions.attention_efficiency <= 1.0,
          "roofline attention efficiency must be in (0, 1], got ", assumptions.attention_efficiency);
  const double rate_flop_per_us = gpu.peak_tflops_bf16 * 1e6 * assumptions.attention_efficiency;
  const double tile_us = 4.0 * product(wanted) / rate_flop_per_us;
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

int64_t LaunchGeometry::key_blocks() const {
  require(kv_heads >= 0 && chunk_tokens >= 0 && block_k >= 1, "launch geometry needs kv_heads, chunk_tokens >= 0 and ",
          "block_k >= 1, got ", kv_heads, ", ", chunk_tokens, ", ", block_k);
  return kv_heads * ((chunk_tokens + block_k - 1) / block_k);
}

SimNs kernel_time_ns(const KernelCoefficients& c, const WorkCounts& work, int64_t heads) {
  return kernel_time_ns(c, work, LaunchGeometry{.heads = heads});
}

SimNs kernel_time_ns(const KernelCoefficients& c, const WorkCounts& work, const LaunchGeometry& launch) {
  return KernelTimer(c, launch)(work);
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

namespace {

double head_ktokens(int64_t heads, int64_t tokens) {
  return static_cast<double>(heads) * static_cast<double>(tokens) / 1024.0;
}

}  // namespace

SimNs estimate_time_ns(const RooflineAssumptions& assumptions, int64_t heads, int64_t local_tokens,
                       int64_t seq_tokens, int64_t last_q) {
  require(heads >= 0 && local_tokens >= 0 && seq_tokens >= local_tokens && last_q >= 0, "estimation of ", heads,
          " heads x ", local_tokens, " local of ", seq_tokens, " tokens, last_q ", last_q);
  require(assumptions.estimate_launch_us >= 0.0 && assumptions.estimate_per_head_ktoken_us >= 0.0 &&
              assumptions.select_launch_us >= 0.0 && assumptions.select_per_head_ktoken_us >= 0.0,
          "estimation coefficients must be >= 0, got ", assumptions.estimate_launch_us, " us + ",
          assumptions.estimate_per_head_ktoken_us, " us per head-ktoken and ", assumptions.select_launch_us, " us + ",
          assumptions.select_per_head_ktoken_us, " us per head-ktoken");
  if (heads == 0 || seq_tokens == 0) return 0;
  const double passes_us =
      local_tokens == 0 || last_q == 0
          ? 0.0
          : assumptions.estimate_launch_us + assumptions.estimate_per_head_ktoken_us *
                                                 head_ktokens(heads, local_tokens) *
                                                 static_cast<double>((last_q + 63) / 64);
  const double select_us =
      assumptions.select_launch_us + assumptions.select_per_head_ktoken_us * head_ktokens(heads, seq_tokens);
  return ns_from_us(passes_us + select_us);
}

SimNs index_build_time_ns(const RooflineAssumptions& assumptions, int64_t heads, int64_t local_tokens,
                          int64_t block_q, int64_t block_k) {
  require(heads >= 0 && local_tokens >= 0, "index build of ", heads, " heads x ", local_tokens, " tokens");
  require(block_q >= 1 && block_k >= 1, "index build blocks must be >= 1, got ", block_q, " x ", block_k);
  require(assumptions.index_build_launch_us >= 0.0 && assumptions.index_build_per_head_ktoken_us >= 0.0,
          "index build coefficients must be >= 0, got ", assumptions.index_build_launch_us, " us and ",
          assumptions.index_build_per_head_ktoken_us, " us per head-ktoken");
  if (heads == 0 || local_tokens == 0) return 0;
  const double block_scale = 128.0 / std::sqrt(static_cast<double>(block_q) * static_cast<double>(block_k));
  return ns_from_us(assumptions.index_build_launch_us +
                    assumptions.index_build_per_head_ktoken_us * head_ktokens(heads, local_tokens) * block_scale);
}

}  // namespace sparsering
