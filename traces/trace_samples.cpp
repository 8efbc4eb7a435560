// Sample selections (traces/trace_samples.hpp).
#include "traces/trace_samples.hpp"

#include <algorithm>
#include <charconv>
#include <string>

#include "common/error.hpp"

namespace sparsering {

namespace {

/// A whole number of at most 9 digits, or -1.
int64_t whole_number(std::string_view text) {
  if (text.empty() || text.size() > 9 || !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  int64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

}  // namespace

std::vector<int64_t> parse_trace_samples(std::string_view spec, int64_t available, std::string_view what) {
  const auto bad = [&](const std::string& why) {
    return InputError(str(what, " '", std::string(spec), "': ", why, " (use all, a count N, or a list i,j,k of the ",
                          available, " samples' indices)"));
  };
  std::vector<int64_t> out;
  if (spec == "all") {
    for (int64_t s = 0; s < available; ++s) out.push_back(s);
    return out;
  }
  if (spec.find(',') == std::string_view::npos) {
    const int64_t count = whole_number(spec);
    if (count < 0) throw bad("not a count or a list");
    if (count < 1 || count > available) throw bad(str("the trace has ", available, " samples"));
    for (int64_t s = 0; s < count; ++s) out.push_back(s);
    return out;
  }
  for (size_t from = 0; from <= spec.size();) {
    const size_t comma = std::min(spec.find(',', from), spec.size());
    const int64_t index = whole_number(spec.substr(from, comma - from));
    if (index < 0) throw bad("a list entry is not a sample index");
    if (index >= available) throw bad(str("sample ", index, " does not exist"));
    if (std::find(out.begin(), out.end(), index) != out.end()) throw bad(str("sample ", index, " is named twice"));
    out.push_back(index);
    from = comma + 1;
  }
  return out;
}

}  // namespace sparsering
