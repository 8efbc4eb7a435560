// A one-line progress bar for long searches, redrawn in place with a carriage return; the CLI
// enables it only when stderr is a terminal, so logs and pipes never see it. Redraws at most ten
// times a second; finish() erases the line. Tested in tests/tuner_search/progress_bar_test.cpp.
#pragma once

#include <chrono>
#include <ostream>
#include <string>

namespace sparsering {

class ProgressBar {
 public:
  /// Draws on `out` only when `enabled`.
  ProgressBar(std::ostream& out, bool enabled, int width = 30);
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  ~ProgressBar();

  /// Shows `fraction` (clamped to [0, 1]) done and `text` after the bar.
  void update(double fraction, const std::string& text);
  /// Erases the bar (idempotent).
  void finish();

 private:
  std::ostream& out_;
  bool enabled_;
  int width_;
  bool drawn_ = false;
  size_t last_length_ = 0;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace sparsering
