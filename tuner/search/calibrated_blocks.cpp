#include "tuner/search/calibrated_blocks.hpp"

#include "common/error.hpp"

namespace sparsering {
namespace {

std::string join(const std::vector<int64_t>& values) {
  std::string out;
  for (const int64_t v : values) out += str(out.empty() ? "" : ", ", v);
  return out;
}

std::string calibrated_shapes(const GpuCalibration& cal) {
  std::string out;
  for (const CalibratedShape& s : cal.shapes) out += str(out.empty() ? "" : ", ", to_string(s.shape));
  return out;
}

}  // namespace

BlockChoice choose_calibrated_blocks(const GpuConfig& gpu, int64_t head_dim, const std::vector<int64_t>& requested,
                                     bool allow_extrapolated) {
  BlockChoice choice;
  if (!gpu.calibration) {
    choice.searched = requested;
    return choice;
  }
  const GpuCalibration& cal = *gpu.calibration;
  for (const int64_t block : requested) {
    const bool calibrated = cal.find(KernelShape{block, block, head_dim}) != nullptr;
    if (calibrated || allow_extrapolated) choice.searched.push_back(block);
    if (!calibrated) (allow_extrapolated ? choice.extrapolated : choice.left_out).push_back(block);
  }
  require(!choice.searched.empty(), "no block size to search: ", gpu.name, "'s calibration lists the kernel shapes ",
          calibrated_shapes(cal), " (block_q x block_k x head_dim), none of blocks ", join(requested), " at head dim ",
          head_dim, ". Calibrate those shapes (sparsering calibrate --shapes, docs/calibration.md) or pass "
          "--allow-extrapolated-shapes to rank them on costs extrapolated from another shape");
  if (!choice.left_out.empty()) {
    choice.note = str("block ", join(choice.left_out), " left out of the search: ", gpu.name, " is calibrated for ",
                      calibrated_shapes(cal), " only (--allow-extrapolated-shapes ranks it on extrapolated costs, marked)");
  } else if (!choice.extrapolated.empty()) {
    choice.note = str("block ", join(choice.extrapolated), " ranked on costs extrapolated from ", calibrated_shapes(cal),
                      " (marked \"extrapolated\"): ", gpu.name, " has no calibration of that shape");
  }
  return choice;
}

}  // namespace sparsering
