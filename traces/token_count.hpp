// Token counts as people type them on the command line: "524288", "512K", "1M" (binary
// multiples: K = 1024, M = 1048576). Tested in tests/traces/token_count_test.cpp.
#pragma once

#include <cstdint>
#include <string_view>

namespace sparsering {

/// Parses a positive token count with an optional K or M suffix (either case). Throws InputError
/// naming `what` (e.g. "--seq-len") and the text when it is not a whole number in [1, 2^40].
int64_t parse_token_count(std::string_view text, std::string_view what);

}  // namespace sparsering
