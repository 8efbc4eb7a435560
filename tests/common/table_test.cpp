#include "common/table.hpp"

#include <gtest/gtest.h>

#include <sstream>

namespace sparsering {
namespace {

TEST(TableTest, AlignsColumnsAndRightAlignsNumbers) {
  Table table({"name", "ms"});
  table.add_row({"forward", "1.5"});
  table.add_row({"bwd", "12.25"});
  std::ostringstream out;
  table.print(out);
  EXPECT_EQ(out.str(),
            "name     ms   \n"
            "-------  -----\n"
            "forward    1.5\n"
            "bwd      12.25\n");
}

TEST(TableTest, RejectsRowOfWrongWidth) {
  Table table({"a", "b"});
  EXPECT_THROW(table.add_row({"1"}), std::logic_error);
}

TEST(TableTest, FixedFormatsDigits) {
  EXPECT_EQ(fixed(3.14159, 2), "3.14");
  EXPECT_EQ(fixed(-0.5, 0), "-0");
}

}  // namespace
}  // namespace sparsering
