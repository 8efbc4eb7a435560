// Tests of core/kernel_build.hpp: the compiled identity is the SHA-256 of the listed sources' code
// (lines that are neither blank nor whole-line comments) as they are on disk (recomputed here with
// an independent SHA-256, tests/tuner_search/file_digest_test.cpp checks it against FIPS 180-4
// vectors), the committed manifest kernels/cuda/kernel_build.sha256
// equals it (so a kernel edit without a manifest update fails here, saying to recalibrate), and the
// list covers every file with device code the listed sources include.
#include "core/kernel_build.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/input_file.hpp"
#include "tuner/search/file_digest.hpp"

namespace sparsering {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = SPARSERING_SOURCE_DIR;

/// A file's code as the identity hashes it: its lines that are neither blank (spaces and tabs
/// only) nor whole-line comments (first non-blank characters "//"), each followed by a newline.
std::string code_of(const std::string& text) {
  std::string code;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line.compare(first, 2, "//") == 0) continue;
    code += line + "\n";
  }
  return code;
}

/// The identity as the documentation defines it: SHA-256 of "<SHA-256 of the file's code>  <path>\n" lines.
std::string identity_of(const std::vector<std::string>& paths) {
  std::string lines;
  for (const std::string& path : paths) lines += sha256_hex(code_of(read_file(kRoot / path))) + "  " + path + "\n";
  return "sha256:" + sha256_hex(lines);
}

std::vector<std::string> listed_sources() {
  std::vector<std::string> out;
  for (const std::string_view path : kernel_build_sources()) out.emplace_back(path);
  return out;
}

/// The value kernels/cuda/kernel_build.sha256 holds (its one line that is not a comment).
std::string manifest_value() {
  std::istringstream in(read_file(kRoot / "kernels/cuda/kernel_build.sha256"));
  std::string line;
  std::string value;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    EXPECT_TRUE(value.empty()) << "kernels/cuda/kernel_build.sha256 holds more than one value";
    value = line;
  }
  return value;
}

bool has_device_code(const std::string& text) {
  static const std::regex marker(R"(__device__|__global__|\bSPARSERING_HD\b)");
  return std::regex_search(text, marker);
}

/// Files with device code that the listed files include (directly or through other project
/// headers) but that are not listed themselves.
std::vector<std::string> unlisted_device_sources(const std::vector<std::string>& listed) {
  static const std::regex include(R"re(#include\s+"([^"]+)")re");
  const std::set<std::string> in_list(listed.begin(), listed.end());
  std::vector<std::string> pending = listed;
  std::set<std::string> seen(listed.begin(), listed.end());
  std::vector<std::string> missing;
  while (!pending.empty()) {
    const std::string path = pending.back();
    pending.pop_back();
    const std::string text = read_file(kRoot / path);
    if (!in_list.count(path) && has_device_code(text)) missing.push_back(path);
    for (std::sregex_iterator it(text.begin(), text.end(), include), end; it != end; ++it) {
      const std::string target = (*it)[1];
      if (fs::is_regular_file(kRoot / target) && seen.insert(target).second) pending.push_back(target);
    }
  }
  std::sort(missing.begin(), missing.end());
  return missing;
}

TEST(KernelBuild, IdentityHasTheDocumentedForm) {
  EXPECT_TRUE(is_kernel_build_identity(this_kernel_build())) << this_kernel_build();
  EXPECT_TRUE(is_kernel_build_identity("sha256:" + std::string(64, 'a')));
  EXPECT_FALSE(is_kernel_build_identity("sha256:" + std::string(64, 'A')));
  EXPECT_FALSE(is_kernel_build_identity("sha256:" + std::string(63, 'a')));
  EXPECT_FALSE(is_kernel_build_identity("sha256:" + std::string(63, 'a') + "g"));
  EXPECT_FALSE(is_kernel_build_identity("sha512:" + std::string(64, 'a')));
  EXPECT_FALSE(is_kernel_build_identity(kUnknownKernelBuild));
}

TEST(KernelBuild, CompiledIdentityIsTheHashOfTheSourcesOnDisk) {
  EXPECT_EQ(this_kernel_build(), identity_of(listed_sources()))
      << "the binary's kernel identity is older than the kernel sources: re-run the configure step";
  // Every listed file counts: the identity of a shorter list differs.
  std::vector<std::string> fewer = listed_sources();
  fewer.pop_back();
  EXPECT_NE(identity_of(fewer), this_kernel_build());
}

TEST(KernelBuild, CommentsAndBlankLinesDoNotCountCodeDoes) {
  const std::string code = "#include <x>\nint f() {\n  return 1;  // a trailing comment counts\n}\n";
  EXPECT_EQ(code_of(code), code);
  EXPECT_EQ(code_of("// header\n" + code + "\n  \t\n   /// doc\n"), code);
  EXPECT_EQ(code_of("#include <x>\n\nint f() {\n  // why\n  return 1;  // a trailing comment counts\n}"), code);
  EXPECT_NE(code_of("#include <x>\nint f() {\n  return 2;  // a trailing comment counts\n}\n"), code);
  EXPECT_NE(code_of("#include <x>\nint f() {\n  return 1;  // another trailing comment\n}\n"), code);
  EXPECT_EQ(code_of(""), "");
}

TEST(KernelBuild, ManifestMatchesTheSources) {
  const std::string computed = identity_of(listed_sources());
  EXPECT_EQ(manifest_value(), computed)
      << "the kernel sources changed: kernels/cuda/kernel_build.sha256 holds \"" << manifest_value()
      << "\" but the sources listed in kernels/cuda/kernel_build_sources.cmake hash to " << computed
      << ". Write the new value into kernels/cuda/kernel_build.sha256 and recalibrate every GPU config on "
         "the new kernels (measure/device/run_calibrate_on_device.sh, docs/calibration.md); until then "
         "simulate, tune and validate warn that the calibrations are stale.";
}

TEST(KernelBuild, ListIsSortedAndCoversTheDeviceCodeItIncludes) {
  const std::vector<std::string> listed = listed_sources();
  ASSERT_FALSE(listed.empty());
  EXPECT_TRUE(std::is_sorted(listed.begin(), listed.end()));
  EXPECT_EQ(std::set<std::string>(listed.begin(), listed.end()).size(), listed.size()) << "a file is listed twice";
  for (const std::string& path : listed) EXPECT_TRUE(fs::is_regular_file(kRoot / path)) << path;
  // The forward and backward kernels are what calibration times.
  for (const char* kernel : {"kernels/cuda/sparse_attn_fwd.cu", "kernels/cuda/sparse_attn_bwd.cu"}) {
    EXPECT_TRUE(std::find(listed.begin(), listed.end(), kernel) != listed.end()) << kernel;
  }
  EXPECT_EQ(unlisted_device_sources(listed), std::vector<std::string>{});
  // The check finds a device header left out of the list.
  std::vector<std::string> without = listed;
  std::erase(without, "kernels/cuda/warp_mma.cuh");
  EXPECT_EQ(unlisted_device_sources(without), std::vector<std::string>{"kernels/cuda/warp_mma.cuh"});
}

}  // namespace
}  // namespace sparsering
