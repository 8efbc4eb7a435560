// .npy writer and reader: random round trips, numpy's alignment rule, hostile headers rejected,
// and the token permutation file equal to the layout module's permutation.
#include "tuner/export/npy_file.hpp"

#include <gtest/gtest.h>

#include <random>

#include "export_test_util.hpp"
#include "tuner/export/token_permutation_file.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

TEST(NpyFile, RoundTripsRandomMatrices) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (int trial = 0; trial < 20; ++trial) {
    Int64Matrix m;
    m.rows = static_cast<int64_t>(rng() % 9);
    m.cols = static_cast<int64_t>(rng() % 17);
    for (int64_t i = 0; i < m.rows * m.cols; ++i) m.values.push_back(static_cast<int64_t>(rng()));
    const std::string bytes = write_npy_int64(m);
    const size_t header_len =
        size_t{static_cast<unsigned char>(bytes[8])} | (size_t{static_cast<unsigned char>(bytes[9])} << 8U);
    EXPECT_EQ((10 + header_len) % 64, 0u) << "data must start 64-byte aligned";
    EXPECT_EQ(bytes[10 + header_len - 1], '\n');
    const Int64Matrix back = read_npy_int64(bytes);
    EXPECT_EQ(back.rows, m.rows);
    EXPECT_EQ(back.cols, m.cols);
    EXPECT_EQ(back.values, m.values);
  }
}

TEST(NpyFile, WritesLittleEndianValues) {
  const std::string bytes = write_npy_int64(Int64Matrix{1, 2, {1, -2}});
  const std::string data = bytes.substr(bytes.size() - 16);
  EXPECT_EQ(data, std::string("\x01\0\0\0\0\0\0\0\xfe\xff\xff\xff\xff\xff\xff\xff", 16));
  EXPECT_NE(bytes.find("'shape': (1, 2)"), std::string::npos);
}

TEST(NpyFile, RejectsMalformedFiles) {
  const std::string good = write_npy_int64(Int64Matrix{2, 2, {1, 2, 3, 4}});
  test::expect_input_error([&] { read_npy_int64("hello"); }, {"bad magic"});
  test::expect_input_error([&] { read_npy_int64(good.substr(0, good.size() - 1)); }, {"needs more data", "31 bytes"});
  // A shape whose element count overflows 64 bits must be refused, not multiplied.
  const std::string header = "{'descr': '<i8', 'fortran_order': False, 'shape': (999999999999, 999999999999), }\n";
  std::string huge("\x93NUMPY\x01\x00", 8);
  huge.push_back(static_cast<char>(header.size()));
  huge.push_back('\0');
  huge += header + std::string(16, '\0');
  test::expect_input_error([&] { read_npy_int64(huge); }, {"needs more data"});
  std::string float_array = good;
  float_array.replace(float_array.find("<i8"), 3, "<f8");
  test::expect_input_error([&] { read_npy_int64(float_array); }, {"not a 2-D '<i8'"});
}

TEST(TokenPermutationFile, MatchesTheLayoutModule) {
  const TokenLayout layout = make_token_layout(LayoutKind::striped, 96, 4, 3);
  const Int64Matrix m = token_permutation_matrix(layout);
  ASSERT_EQ(m.rows, 4);
  ASSERT_EQ(m.cols, 24);
  for (int32_t r = 0; r < 4; ++r) {
    for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(m.values[static_cast<size_t>(r * 24 + i)], layout.global_token(r, i));
  }
  ExportBundle bundle;
  add_token_permutation(bundle, layout, "rank");
  ASSERT_NE(bundle.find("token_permutation.npy"), nullptr);
  EXPECT_EQ(read_npy_int64(bundle.find("token_permutation.npy")->bytes).values, m.values);
  EXPECT_TRUE(test::any_contains(bundle.notes, "Position ids are the same values"));
}

}  // namespace
}  // namespace sparsering
