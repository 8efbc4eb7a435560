// Sample selections: all, a count, a list; everything else refused with the flag named.
#include "traces/trace_samples.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"

namespace sparsering {
namespace {

TEST(TraceSamples, AllACountAndAList) {
  EXPECT_EQ(parse_trace_samples("all", 3, "--samples"), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(parse_trace_samples("2", 3, "--samples"), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(parse_trace_samples("3", 3, "--samples"), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(parse_trace_samples("2,0", 3, "--samples"), (std::vector<int64_t>{2, 0}));
}

TEST(TraceSamples, RejectsEverythingElse) {
  for (const char* bad : {"", "0", "4", "-1", "x", "1.5", "all,1", "0,0", "0,3", ",", "1,", "1,,2", " 1", "1 ,2", "9999999999"}) {
    try {
      parse_trace_samples(bad, 3, "--samples");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--samples"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace sparsering
