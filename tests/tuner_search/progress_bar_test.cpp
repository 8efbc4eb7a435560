// The progress bar (tuner/search/progress_bar.hpp): silent when disabled, one redrawn line when
// enabled, erased by finish().
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "tuner/search/progress_bar.hpp"

namespace sparsering {
namespace {

TEST(ProgressBar, DisabledWritesNothing) {
  std::ostringstream out;
  {
    ProgressBar bar(out, false);
    bar.update(0.5, "half");
    bar.finish();
  }
  EXPECT_TRUE(out.str().empty());
}

TEST(ProgressBar, DrawsOneLineAndErasesIt) {
  std::ostringstream out;
  ProgressBar bar(out, true, 10);
  bar.update(0.5, "half way");
  const std::string drawn = out.str();
  EXPECT_EQ(drawn, "\r[#####.....] 50% half way");
  EXPECT_EQ(drawn.find('\n'), std::string::npos);
  bar.finish();
  const std::string erased = out.str().substr(drawn.size());
  EXPECT_EQ(erased, "\r" + std::string(drawn.size() - 1, ' ') + "\r");
  bar.finish();  // idempotent
  EXPECT_EQ(out.str().size(), drawn.size() + erased.size());
}

TEST(ProgressBar, ClampsAndThrottles) {
  std::ostringstream out;
  ProgressBar bar(out, true, 4);
  bar.update(7.0, "x");
  EXPECT_EQ(out.str(), "\r[####] 100% x");
  bar.update(0.0, "y");  // within 100 ms of the last draw: skipped
  EXPECT_EQ(out.str(), "\r[####] 100% x");
}

}  // namespace
}  // namespace sparsering
