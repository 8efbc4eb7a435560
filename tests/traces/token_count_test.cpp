// Token counts with K / M suffixes.
#include "traces/token_count.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"

namespace sparsering {
namespace {

TEST(TokenCount, AcceptsPlainAndSuffixed) {
  EXPECT_EQ(parse_token_count("524288", "--seq-len"), 524288);
  EXPECT_EQ(parse_token_count("512K", "--seq-len"), 524288);
  EXPECT_EQ(parse_token_count("512k", "--seq-len"), 524288);
  EXPECT_EQ(parse_token_count("1M", "--seq-len"), 1048576);
  EXPECT_EQ(parse_token_count("4m", "--seq-len"), 4194304);
  EXPECT_EQ(parse_token_count("1", "--seq-len"), 1);
  EXPECT_EQ(parse_token_count("1048576M", "--seq-len"), int64_t{1} << 40);
}

TEST(TokenCount, RejectsEverythingElse) {
  for (const char* bad :
       {"", "K", "0", "-5", "+5", "1.5M", "12Q", "512 K", " 512", "1G", "1048577M", "99999999999999999999", "0x10"}) {
    try {
      parse_token_count(bad, "--seq-len");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--seq-len"), std::string::npos);
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace sparsering
