#include "core/ring_schedule.hpp"

#include "common/error.hpp"

namespace sparsering {

RingSchedule::RingSchedule(std::vector<int64_t> level_sizes) {
  require(!level_sizes.empty(), "a ring needs at least one level");
  int64_t product = 1;
  for (size_t l = 0; l < level_sizes.size(); ++l) {
    require(level_sizes[l] >= 1, "ring level ", l, " size must be >= 1, got ", level_sizes[l]);
    require(level_sizes[l] <= (int64_t{1} << 20) && product * level_sizes[l] <= (int64_t{1} << 20),
            "ring of more than 2^20 positions (level ", l, " size ", level_sizes[l], ")");
    strides_.push_back(static_cast<int32_t>(product));
    sizes_.push_back(static_cast<int32_t>(level_sizes[l]));
    product *= level_sizes[l];
  }
  ranks_ = static_cast<int32_t>(product);
}

int32_t RingSchedule::source(int32_t position, int32_t step) const {
  int32_t out = 0;
  for (int32_t l = 0; l < levels(); ++l) {
    const int32_t s = level_size(l);
    out += ((digit(position, l) - digit(step, l)) % s + s) % s * stride(l);
  }
  return out;
}

int32_t RingSchedule::arrival_level(int32_t step) const {
  for (int32_t l = 0; l < levels(); ++l) {
    if (digit(step, l) != 0) return l;
  }
  return -1;  // step 0: the own chunk
}

bool RingSchedule::sends_at(int32_t step, int32_t level) const {
  for (int32_t l = 0; l < level; ++l) {
    if (digit(step, l) != 0) return false;
  }
  return digit(step, level) < level_size(level) - 1;
}

int32_t RingSchedule::next(int32_t position, int32_t level) const {
  const int32_t d = digit(position, level);
  return position + ((d + 1) % level_size(level) - d) * stride(level);
}

int32_t RingSchedule::prev(int32_t position, int32_t level) const {
  const int32_t d = digit(position, level);
  const int32_t s = level_size(level);
  return position + ((d - 1 + s) % s - d) * stride(level);
}

}  // namespace sparsering
