// The watchdog of common/time_limit.hpp. Tested in tests/common/time_limit_test.cpp.
#include "common/time_limit.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "common/error.hpp"
#include "common/temporary_paths.hpp"
#include "common/text_safety.hpp"

namespace sparsering {

namespace {

constexpr double kCenturySeconds = 100.0 * 365.25 * 24 * 3600;

/// Writes all of `text` to stderr with write(2): no stream lock another thread may hold.
void write_stderr(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

TimeLimit::TimeLimit(double seconds, Message message) {
  require(seconds > 0.0, "a time budget must be > 0 seconds, got ", seconds);
  // Beyond a century the limit never fires; clamping keeps the deadline representable.
  seconds = std::min(seconds, kCenturySeconds);
  watchdog_ = std::thread([this, seconds, message = std::move(message)] { watch(seconds, message); });
}

TimeLimit::~TimeLimit() { disarm(); }

void TimeLimit::disarm() {
  {
    // Blocks while the watchdog fires (it holds the lock until the process ends).
    const std::lock_guard<std::mutex> lock(mutex_);
    disarmed_ = true;
  }
  wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

void TimeLimit::watch(double seconds, const Message& message) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(seconds));
  std::unique_lock<std::mutex> lock(mutex_);
  if (wake_.wait_until(lock, deadline, [this] { return disarmed_; })) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string text;
  try {
    text = message(elapsed);
  } catch (...) {
    text = "the command ran past its time budget";
  }
  remove_registered_temporaries();
  write_stderr("error: " + escape_for_terminal(text, true) + "\n");
  std::_Exit(2);
}

}  // namespace sparsering
