#include "tuner/search/progress_bar.hpp"

#include <algorithm>
#include <cmath>

namespace sparsering {

ProgressBar::ProgressBar(std::ostream& out, bool enabled, int width)
    : out_(out), enabled_(enabled), width_(std::max(width, 1)) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(double fraction, const std::string& text) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double done = std::isfinite(fraction) ? std::clamp(fraction, 0.0, 1.0) : 0.0;
  const auto filled = static_cast<int>(std::lround(done * width_));
  std::string line;
  line.reserve(static_cast<size_t>(width_) + text.size() + 8);
  line.push_back('[');
  line.append(static_cast<size_t>(filled), '#');
  line.append(static_cast<size_t>(width_ - filled), '.');
  line.append("] ");
  line.append(std::to_string(static_cast<int>(std::lround(done * 100.0))));
  line.append("% ");
  line.append(text);
  const size_t length = line.size();
  if (length < last_length_) line += std::string(last_length_ - length, ' ');  // cover the longer previous line
  last_length_ = length;
  out_ << '\r' << line << std::flush;
  drawn_ = true;
}

void ProgressBar::finish() {
  if (!enabled_ || !drawn_) return;
  out_ << '\r' << std::string(last_length_, ' ') << '\r' << std::flush;
  drawn_ = false;
  last_length_ = 0;
}

}  // namespace sparsering
