// Error types. The library throws; only the CLI decides exit codes (InputError -> 2, others -> 1).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace sparsering {

/// Bad input from the user: a malformed file, an invalid config value, an impossible plan or
/// argument. The message names what is wrong (key path, field, value). The CLI exits with 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Concatenates the arguments with operator<< into one string (g++ 12 has no std::format).
template <typename... Args>
std::string str(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

/// Throws InputError built from the arguments unless `condition` holds.
template <typename... Args>
void require(bool condition, Args&&... message) {
  if (!condition) throw InputError(str(std::forward<Args>(message)...));
}

}  // namespace sparsering
