// Tests of measure/calibration/replayed_cells.hpp: a replay's cells.csv read as launches (shape,
// counts, time, placement; empty cells left out), the refusals (another kernel build, not a
// replay, a column missing, key blocks that disagree with the shape, a cell with work and no
// time), and the shipped replays read back.
#include <gtest/gtest.h>

#include <cstring>

#include <filesystem>
#include <string>

#include "common/atomic_file.hpp"
#include "measure/calibration/kernel_calibration.hpp"
#include "measure/calibration/replayed_cells.hpp"
#include "tests/config/config_test_util.hpp"

namespace sparsering {
namespace {

using test::expect_input_error;

const char* kHeader =
    "direction,position,step,block_q,block_k,head_dim,heads,kv_heads,chunk_tokens,lists,tiles,masked_tiles,columns,"
    "column_chunks,key_lists,column_lists,column_items,key_blocks,measured_us,predicted_us\n";

std::string validation(const std::string& build, const std::string& mode = "replay") {
  return R"({"format": "sparsering-validation", "mode": ")" + mode + R"(", "plan": "c99-test",
             "calibration": {"this_kernel_build": ")" + build + R"("}})";
}

TEST(ReplayedCells, RowsWithWorkBecomeLaunchesOfTheReplaysPlacement) {
  // 16 heads over 2 K/V heads, 8192-token chunk, 64-token blocks: 2 x 128 = 256 key blocks.
  const std::string csv = std::string(kHeader) +
                          "forward,0,0,64,64,128,16,2,8192,2048,9000,128,300,40,0,30,40,256,812.5,800\n"
                          "forward,0,1,64,64,128,16,2,8192,0,0,0,0,0,0,0,0,256,0,0\n"
                          "backward,1,0,64,64,128,16,2,8192,2048,9000,128,300,40,250,30,40,256,1500.25,1400\n";
  const std::vector<KernelMeasurement> cells = parse_replayed_cells(csv, validation("sha256:ab"), "cells.csv", "sha256:ab");
  ASSERT_EQ(cells.size(), 2u);  // the empty cell launches nothing
  const KernelMeasurement& f = cells[0];
  EXPECT_EQ(f.direction, "forward");
  EXPECT_EQ(f.q_heads, 16);
  EXPECT_EQ(f.kv_heads, 2);
  EXPECT_EQ(f.local_tokens, 8192);
  EXPECT_EQ(f.block_q, 64);
  EXPECT_EQ(f.head_dim, 128);
  EXPECT_EQ(f.lists, 2048);
  EXPECT_EQ(f.tiles, 9000);
  EXPECT_EQ(f.columns, 300);
  EXPECT_EQ(f.column_chunks, 40);
  EXPECT_EQ(f.column_lists, 30);
  EXPECT_EQ(f.column_items, 40);
  EXPECT_EQ(f.median_us, 812.5);
  EXPECT_EQ(f.placement, "replay:c99-test");
  EXPECT_TRUE(is_replayed_cell(f));
  EXPECT_EQ(launched_key_blocks(f), 256);
  EXPECT_EQ(cells[1].direction, "backward");
  EXPECT_EQ(cells[1].key_lists, 250);
  EXPECT_EQ(cells[1].median_us, 1500.25);
  EXPECT_EQ(cells[1].longest_key_list, -1) << "no such column: not recorded";
  // With the longest key list recorded (a column between column_items and key_blocks).
  std::string with_longest = csv;
  with_longest.replace(with_longest.find("column_items,key_blocks"), 23, "column_items,longest_key_list,key_blocks");
  for (size_t at = with_longest.find("8192,"); at != std::string::npos; at = with_longest.find("8192,", at + 1)) {
    const size_t blocks = with_longest.find(",256,", at);
    with_longest.insert(blocks, ",37");
  }
  const std::vector<KernelMeasurement> longest =
      parse_replayed_cells(with_longest, validation("sha256:ab"), "cells.csv", "sha256:ab");
  ASSERT_EQ(longest.size(), 2u);
  EXPECT_EQ(longest[1].longest_key_list, 37);
  EXPECT_EQ(longest[1].sm_clock_mhz, 0.0) << "no clock column: not probed";
  // With the clock of every cell (the last column; empty for a cell that launched nothing).
  std::string with_clock = std::string(kHeader);
  with_clock.insert(with_clock.find('\n'), ",measured_sm_clock_mhz");
  with_clock += "forward,0,0,64,64,128,16,2,8192,2048,9000,128,300,40,0,30,40,256,812.5,800,1845.5\n"
                "forward,0,1,64,64,128,16,2,8192,0,0,0,0,0,0,0,0,256,0,0,\n";
  const std::vector<KernelMeasurement> clocked = parse_replayed_cells(with_clock, validation("sha256:ab"), "cells.csv", "sha256:ab");
  ASSERT_EQ(clocked.size(), 1u);
  EXPECT_EQ(clocked[0].sm_clock_mhz, 1845.5);
  KernelMeasurement grid;
  grid.placement = "banded";
  EXPECT_FALSE(is_replayed_cell(grid));
}

TEST(ReplayedCells, RefusesWhatCannotEnterAFit) {
  const std::string row = "forward,0,0,64,64,128,16,2,8192,2048,9000,128,300,40,0,30,40,256,812.5,800\n";
  const std::string csv = std::string(kHeader) + row;
  // The csv with the first `from` of its row replaced by `to`.
  const auto changed = [&](const std::string& from, const std::string& to) {
    std::string text = csv;
    text.replace(text.find(from, std::strlen(kHeader)), from.size(), to);
    return text;
  };
  expect_input_error([&] { parse_replayed_cells(csv, validation("sha256:old"), "r/cells.csv", "sha256:new"); },
                     {"r/cells.csv", "replayed on kernel build sha256:old", "kernel build sha256:new"});
  expect_input_error([&] { parse_replayed_cells(csv, validation("sha256:ab", "ring"), "r/cells.csv", "sha256:ab"); },
                     {"not a replay's"});
  expect_input_error([&] { parse_replayed_cells(csv, "{not json", "r/cells.csv", "sha256:ab"); },
                     {"r/cells.csv", "validation.json"});
  expect_input_error([&] { parse_replayed_cells("direction,block_q\nforward,64\n", validation("x"), "r/cells.csv", "x"); },
                     {"no column \"block_k\""});
  const std::string wrong_blocks = changed(",256,", ",255,");
  expect_input_error([&] { parse_replayed_cells(wrong_blocks, validation("x"), "r/cells.csv", "x"); },
                     {"r/cells.csv:2", "255 key blocks", "have 256"});
  const std::string no_time = changed("812.5", "0");
  expect_input_error([&] { parse_replayed_cells(no_time, validation("x"), "r/cells.csv", "x"); },
                     {"r/cells.csv:2", "measured_us > 0"});
  const std::string bad_count = changed("9000", "-900");
  expect_input_error([&] { parse_replayed_cells(bad_count, validation("x"), "r/cells.csv", "x"); },
                     {"r/cells.csv:2", "column tiles"});
  // Predicted again: of the kernels it names as measured, not of the binary that predicted it.
  const std::string again = R"({"format": "sparsering-validation", "mode": "replay", "plan": "c99-test",
      "calibration": {"this_kernel_build": "x"}, "provenance": {"predicted_again": {"commit": "abc"}}})";
  expect_input_error([&] { parse_replayed_cells(csv, again, "r/cells.csv", "x"); },
                     {"predicted again", "--measured", "does not name the kernel build it measured"});
  const std::string again_named = R"({"format": "sparsering-validation", "mode": "replay", "plan": "c99-test",
      "calibration": {"this_kernel_build": "new"},
      "provenance": {"predicted_again": {"commit": "abc", "measured_kernel_build": "old"}}})";
  EXPECT_EQ(parse_replayed_cells(csv, again_named, "r/cells.csv", "old").size(), 1u);
  expect_input_error([&] { parse_replayed_cells(csv, again_named, "r/cells.csv", "new"); },
                     {"replayed on kernel build old", "kernel build new"});
  const std::string no_heads = changed(",16,2,", ",0,2,");
  expect_input_error([&] { parse_replayed_cells(no_heads, validation("x"), "r/cells.csv", "x"); },
                     {"0 heads over 2 K/V heads"});
  const std::string huge_chunk = changed(",8192,", ",9223372036854775807,");
  expect_input_error([&] { parse_replayed_cells(huge_chunk, validation("x"), "r/cells.csv", "x"); },
                     {"r/cells.csv:2", "column chunk_tokens", "<= 1099511627776"});
  const std::string odd_heads = changed(",16,2,", ",15,2,");
  expect_input_error([&] { parse_replayed_cells(odd_heads, validation("x"), "r/cells.csv", "x"); },
                     {"15 heads over 2 K/V heads"});
}

TEST(ReplayedCells, TheShippedReplaysReadBackForTheirKernelBuild) {
  // Every replay the H200 calibration fits (docs/calibration.md, "Replayed ring cells") is of the
  // kernel build that calibration records, and its rows are launches of one replay each.
  const std::filesystem::path root = std::filesystem::path(SPARSERING_SOURCE_DIR) / "docs/calibration/h200-eec1e0a2-replays";
  const std::string build = "sha256:eec1e0a2cf85b7a6a8875078208e58d203e4afb71e3d758a7fb8aa8ce44d6698";
  int replays = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    const std::vector<KernelMeasurement> cells = parse_replayed_cells(
        read_file(entry.path() / "cells.csv"), read_file(entry.path() / "validation.json"), entry.path().string(), build);
    ASSERT_FALSE(cells.empty()) << entry.path();
    for (const KernelMeasurement& k : cells) {
      EXPECT_EQ(k.placement, "replay:" + entry.path().filename().string());
      EXPECT_GT(k.median_us, 0.0);
    }
    ++replays;
  }
  EXPECT_EQ(replays, 18);
}

TEST(ReplayedCells, TheCurrentReplaysRecordTheLongestKeyListOfEveryCell) {
  // The H200 calibration of kernel build 8a07dff2: its 18 replays predicted again by a version that
  // counts the longest key list (beside their recorded times) and its 7 backward replays, which
  // recorded it when they ran; all of that kernel build.
  const std::filesystem::path docs = std::filesystem::path(SPARSERING_SOURCE_DIR) / "docs/calibration";
  const std::string build = "sha256:8a07dff2123f93a136cf633218a0a0a59c170c13a2fae0c746779975f5f08575";
  int replays = 0;
  for (const char* folder : {"h200-8a07dff2-replays", "h200-8a07dff2-backward-replays"}) {
    for (const auto& entry : std::filesystem::directory_iterator(docs / folder)) {
      const std::vector<KernelMeasurement> cells = parse_replayed_cells(
          read_file(entry.path() / "cells.csv"), read_file(entry.path() / "validation.json"), entry.path().string(), build);
      ASSERT_FALSE(cells.empty()) << entry.path();
      for (const KernelMeasurement& k : cells) {
        ASSERT_GE(k.longest_key_list, 0) << entry.path();
        ASSERT_LE(k.longest_key_list, k.tiles) << entry.path();
      }
      ++replays;
    }
  }
  EXPECT_EQ(replays, 25);
}

}  // namespace
}  // namespace sparsering
