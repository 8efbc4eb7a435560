// The identity of this build's kernels: a SHA-256 over the kernel sources that decide how fast
// the calibrated kernels run (kernels/cuda/kernel_build_sources.cmake lists them; the hash is
// computed by cmake/SparseringKernelBuild.cmake at configure time, so CPU-only builds carry it
// too). A calibration records the identity it was measured on (`kernel_build:` of a GPU config);
// the simulator compares it with this one and warns when they differ (docs/calibration.md).
// Tested in tests/core/kernel_build_test.cpp.
#pragma once

#include <span>
#include <string_view>

namespace sparsering {

/// A measured calibration whose kernel build was not recorded (measured before identities existed):
/// never this build.
inline constexpr std::string_view kUnknownKernelBuild = "unknown";

/// "sha256:<64 lower-case hex digits>": this build's kernel identity.
std::string_view this_kernel_build();

/// The hashed sources, relative to the source root, in hash order.
std::span<const std::string_view> kernel_build_sources();

/// True when `text` has the form of an identity: "sha256:" and 64 lower-case hex digits.
bool is_kernel_build_identity(std::string_view text);

}  // namespace sparsering
