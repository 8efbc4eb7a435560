#include "common/source_commit.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>

namespace sparsering {
namespace {

/// Standard output of a shell command ("" when it cannot run), without trailing newlines.
std::string command_output(const char* command) {
  std::string out;
  if (FILE* pipe = popen(command, "r"); pipe != nullptr) {
    std::array<char, 128> buffer{};
    while (fgets(buffer.data(), static_cast<int>(buffer.size()), pipe) != nullptr) out += buffer.data();
    pclose(pipe);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace

std::string current_commit() {
  if (const char* env = std::getenv("SPARSERING_COMMIT"); env != nullptr && *env != '\0') return env;
  const std::string head = command_output("git rev-parse HEAD 2>/dev/null");
  if (head.empty()) return "unknown";
  return command_output("git status --porcelain --untracked-files=no 2>/dev/null").empty() ? head : head + "+modified";
}

}  // namespace sparsering
