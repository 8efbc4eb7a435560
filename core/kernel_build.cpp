#include "core/kernel_build.hpp"

#include "kernel_build_generated.hpp"

namespace sparsering {

std::string_view this_kernel_build() { return generated::kKernelBuild; }

std::span<const std::string_view> kernel_build_sources() { return generated::kKernelBuildSources; }

bool is_kernel_build_identity(std::string_view text) {
  constexpr std::string_view kPrefix = "sha256:";
  if (text.size() != kPrefix.size() + 64 || text.substr(0, kPrefix.size()) != kPrefix) return false;
  for (const char c : text.substr(kPrefix.size())) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace sparsering
