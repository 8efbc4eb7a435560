// Config references: bare names resolve to the sibling kind folder, paths to the referring file's
// folder, absolute paths stay.
#include "sim/config/config_ref.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"

namespace sparsering {
namespace {

TEST(ConfigRef, NamesAndPaths) {
  EXPECT_FALSE(is_path_ref("h100-sxm"));
  EXPECT_FALSE(is_path_ref("qwen2.5-3b"));
  EXPECT_TRUE(is_path_ref("h100.yaml"));
  EXPECT_TRUE(is_path_ref("x.yml"));
  EXPECT_TRUE(is_path_ref("../gpus/h100"));
  EXPECT_EQ(resolve_config_ref("h100-sxm", "/r/configs/clusters/c.yaml", "gpus"), "/r/configs/gpus/h100-sxm.yaml");
  EXPECT_EQ(resolve_config_ref("qwen2.5-3b", "/r/configs/plans/p.yaml", "models"), "/r/configs/models/qwen2.5-3b.yaml");
  EXPECT_EQ(resolve_config_ref("local.yaml", "/r/elsewhere/p.yaml", "models"), "/r/elsewhere/local.yaml");
  EXPECT_EQ(resolve_config_ref("../m/x.yaml", "/r/elsewhere/p.yaml", "models"), "/r/m/x.yaml");
  EXPECT_EQ(resolve_config_ref("/abs/x.yaml", "/r/elsewhere/p.yaml", "models"), "/abs/x.yaml");
  EXPECT_EQ(resolve_config_ref("h200", "configs/clusters/c.yaml", "gpus"), "configs/gpus/h200.yaml");
  EXPECT_THROW(resolve_config_ref("", "/r/c.yaml", "gpus"), InputError);
}

}  // namespace
}  // namespace sparsering
