// The time limit (common/time_limit.hpp): in a forked child, a limit that passes ends the process
// with exit 2, its message on stderr and the registered temporaries removed; a limit disarmed in
// time (or destroyed) never fires; a budget that is not > 0 is bad input.
#include "common/time_limit.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "common/error.hpp"
#include "common/temporary_paths.hpp"

namespace sparsering {
namespace {

namespace fs = std::filesystem;

struct ChildResult {
  int code = -1;       // exit status, -1 when killed by a signal
  std::string stderr_text;
};

/// Runs `body` in a forked child whose stderr goes to `log`; returns its exit status and stderr.
template <typename Body>
ChildResult run_child(const fs::path& log, const Body& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (std::freopen(log.c_str(), "w", stderr) == nullptr) ::_exit(97);
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ChildResult result;
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(log);
  result.stderr_text.assign(std::istreambuf_iterator<char>(in), {});
  return result;
}

class TimeLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsering-time-limit-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(TimeLimitTest, FiringEndsTheProcessWithExitTwoAndItsMessage) {
  const fs::path temporary = dir_ / "plan.yaml.tmp.x";
  const ChildResult r = run_child(dir_ / "log", [&] {
    std::ofstream(temporary) << "partial";
    const TemporaryRegistration registration(temporary, TemporaryRegistration::Kind::file);
    const TimeLimit limit(0.05, [](double elapsed) { return str("stopped after ", elapsed >= 0.05 ? "the budget" : "?"); });
    std::this_thread::sleep_for(std::chrono::seconds(20));  // the limit ends this long before
    ::_exit(3);
  });
  EXPECT_EQ(r.code, 2) << r.stderr_text;
  EXPECT_EQ(r.stderr_text, "error: stopped after the budget\n");
  EXPECT_FALSE(fs::exists(temporary)) << "a registered temporary survived the limit";
}

TEST_F(TimeLimitTest, MessageIsEscapedForTheTerminal) {
  const ChildResult r = run_child(dir_ / "log", [] {
    const TimeLimit limit(0.01, [](double) { return std::string("name \033[2J"); });
    std::this_thread::sleep_for(std::chrono::seconds(20));
  });
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.stderr_text.find('\033'), std::string::npos) << r.stderr_text;
}

TEST_F(TimeLimitTest, DisarmedInTimeNeverFires) {
  const ChildResult r = run_child(dir_ / "log", [] {
    {
      TimeLimit limit(0.2, [](double) { return std::string("fired"); });
      limit.disarm();
      limit.disarm();  // idempotent
    }
    { const TimeLimit destroyed(0.2, [](double) { return std::string("fired"); }); }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // past both budgets
  });
  EXPECT_EQ(r.code, 0) << r.stderr_text;
  EXPECT_EQ(r.stderr_text, "");
}

TEST_F(TimeLimitTest, HugeBudgetIsAcceptedAndDisarms) {
  TimeLimit limit(1e300, [](double) { return std::string("fired"); });
  limit.disarm();
}

TEST_F(TimeLimitTest, BudgetMustBePositive) {
  for (const double seconds : {0.0, -1.0, std::nan("")}) {
    EXPECT_THROW(TimeLimit(seconds, [](double) { return std::string(); }), InputError) << seconds;
  }
}

}  // namespace
}  // namespace sparsering
