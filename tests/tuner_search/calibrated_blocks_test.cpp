// Tests of tuner/search/calibrated_blocks.hpp: calibrated blocks are searched, uncalibrated ones
// are left out with a note (or kept and named extrapolated when allowed), an uncalibrated GPU keeps
// every block, and a calibration covering none of the requested blocks is refused.
#include "tuner/search/calibrated_blocks.hpp"

#include <gtest/gtest.h>

#include "tests/config/config_test_util.hpp"

namespace sparsering {
namespace {

GpuConfig gpu_calibrated_at(const std::vector<KernelShape>& shapes) {
  GpuConfig gpu;
  gpu.name = "test-gpu";
  GpuCalibration cal;
  cal.kernel_build = "unknown";
  for (const KernelShape& shape : shapes) {
    CalibratedShape s;
    s.shape = shape;
    cal.shapes.push_back(s);
  }
  gpu.calibration = cal;
  return gpu;
}

TEST(CalibratedBlocks, LeavesUncalibratedBlocksOutWithANote) {
  const GpuConfig gpu = gpu_calibrated_at({{64, 64, 128}, {128, 128, 64}});
  const BlockChoice choice = choose_calibrated_blocks(gpu, 128, {64, 128}, false);
  EXPECT_EQ(choice.searched, (std::vector<int64_t>{64}));
  EXPECT_EQ(choice.left_out, (std::vector<int64_t>{128}));
  EXPECT_TRUE(choice.extrapolated.empty());
  EXPECT_NE(choice.note.find("block 128 left out of the search"), std::string::npos) << choice.note;
  EXPECT_NE(choice.note.find("64x64x128, 128x128x64"), std::string::npos) << choice.note;
  EXPECT_NE(choice.note.find("--allow-extrapolated-shapes"), std::string::npos) << choice.note;
  // The head dim counts: at head dim 64 only block 128 is calibrated.
  EXPECT_EQ(choose_calibrated_blocks(gpu, 64, {64, 128}, false).searched, (std::vector<int64_t>{128}));
  // Everything calibrated: nothing to say.
  const BlockChoice both = choose_calibrated_blocks(gpu_calibrated_at({{64, 64, 128}, {128, 128, 128}}), 128, {128, 64}, false);
  EXPECT_EQ(both.searched, (std::vector<int64_t>{128, 64}));
  EXPECT_TRUE(both.note.empty());
}

TEST(CalibratedBlocks, KeepsExtrapolatedBlocksWhenAllowedAndNamesThem) {
  const BlockChoice choice = choose_calibrated_blocks(gpu_calibrated_at({{64, 64, 128}}), 128, {64, 128, 256}, true);
  EXPECT_EQ(choice.searched, (std::vector<int64_t>{64, 128, 256}));
  EXPECT_EQ(choice.extrapolated, (std::vector<int64_t>{128, 256}));
  EXPECT_TRUE(choice.left_out.empty());
  EXPECT_NE(choice.note.find("block 128, 256 ranked on costs extrapolated from 64x64x128"), std::string::npos) << choice.note;
}

TEST(CalibratedBlocks, UncalibratedGpuKeepsEveryBlock) {
  GpuConfig gpu;
  gpu.name = "roofline-gpu";
  const BlockChoice choice = choose_calibrated_blocks(gpu, 128, {64, 128}, false);
  EXPECT_EQ(choice.searched, (std::vector<int64_t>{64, 128}));
  EXPECT_TRUE(choice.left_out.empty() && choice.extrapolated.empty() && choice.note.empty());
}

TEST(CalibratedBlocks, RefusesWhenNoRequestedBlockIsCalibrated) {
  test::expect_input_error([] { choose_calibrated_blocks(gpu_calibrated_at({{64, 64, 128}}), 128, {128}, false); },
                           {"no block size to search", "test-gpu", "64x64x128", "none of blocks 128 at head dim 128",
                            "sparsering calibrate --shapes", "--allow-extrapolated-shapes"});
}

}  // namespace
}  // namespace sparsering
