// Token-count parsing (see token_count.hpp).
#include "traces/token_count.hpp"

#include <charconv>
#include <string>

#include "common/error.hpp"

namespace sparsering {

int64_t parse_token_count(std::string_view text, std::string_view what) {
  constexpr int64_t kMax = int64_t{1} << 40;
  auto bad = [&] {
    return InputError(str(what,
                          " must be a whole number of tokens in [1, 2^40], optionally with a K (x1024) or M "
                          "(x1048576) suffix, like 512K; got '",
                          text, "'"));
  };
  std::string_view digits = text;
  int64_t multiplier = 1;
  if (!digits.empty()) {
    const char last = digits.back();
    if (last == 'K' || last == 'k') multiplier = int64_t{1} << 10;
    if (last == 'M' || last == 'm') multiplier = int64_t{1} << 20;
    if (multiplier != 1) digits.remove_suffix(1);
  }
  if (digits.empty() || digits.front() == '+' || digits.front() == '-') throw bad();
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size() || value < 1 || value > kMax / multiplier) throw bad();
  return value * multiplier;
}

}  // namespace sparsering
