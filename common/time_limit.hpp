// A wall-clock budget for work that cannot stop on its own in time (one simulation of a large
// plan may run for minutes): a watchdog thread that, once the budget has passed, removes the
// registered temporaries (common/temporary_paths.hpp), prints "error: <message>" on stderr and
// ends the process with exit code 2, the code of a request beyond its budget (cli/app_runner.hpp).
// Arm it around work that writes no final output, and disarm() before writing outputs: disarm()
// waits for a watchdog that is already firing, so no output is ever half written by a process the
// limit ended. Tested in tests/common/time_limit_test.cpp.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace sparsering {

class TimeLimit {
 public:
  /// The message printed when the budget is spent, given the seconds elapsed since arming. Runs on
  /// the watchdog thread: it may only read state that is safe to read from another thread.
  using Message = std::function<std::string(double elapsed_seconds)>;

  /// Arms the watchdog: `seconds` from now it fires unless disarmed. Throws InputError unless
  /// seconds > 0.
  TimeLimit(double seconds, Message message);
  TimeLimit(const TimeLimit&) = delete;
  TimeLimit& operator=(const TimeLimit&) = delete;
  /// Disarms.
  ~TimeLimit();

  /// Stops the watchdog; returns once it will never fire. Idempotent.
  void disarm();

 private:
  void watch(double seconds, const Message& message);

  std::mutex mutex_;
  std::condition_variable wake_;
  bool disarmed_ = false;
  std::thread watchdog_;
};

}  // namespace sparsering
