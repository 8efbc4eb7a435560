// Tests of current_commit (common/source_commit.cpp): SPARSERING_COMMIT names the tree when set;
// otherwise the answer is git's HEAD, possibly marked "+modified", or "unknown" outside a checkout.
#include "common/source_commit.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>
#include <regex>
#include <string>

namespace sparsering {
namespace {

/// Sets an environment variable for one scope and restores its previous value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name); old != nullptr) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(SourceCommit, TheEnvironmentNamesTheTree) {
  const ScopedEnv env("SPARSERING_COMMIT", "0123abc+modified");
  EXPECT_EQ(current_commit(), "0123abc+modified");
}

TEST(SourceCommit, OtherwiseGitOrUnknown) {
  const ScopedEnv env("SPARSERING_COMMIT", nullptr);
  const std::string commit = current_commit();
  EXPECT_TRUE(commit == "unknown" || std::regex_match(commit, std::regex("[0-9a-f]{40}(\\+modified)?"))) << commit;
}

}  // namespace
}  // namespace sparsering
