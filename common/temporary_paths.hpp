// Temporary outputs never outlive their writer. A temporary is named `<target>.tmp.<pid>`;
// while it lives it is listed in a fixed table that a SIGINT / SIGTERM / SIGHUP handler walks
// with async-signal-safe calls only (unlink, rmdir), before the signal is raised again with its
// default action (so the exit status still says what killed the process). Temporaries left by a
// process that died without running the handler (SIGKILL, power loss) are removed by the next
// writer of the same target, once their pid names no live process.
// Tested in tests/common/temporary_paths_test.cpp and tests/cli/hostile_output_cli_test.cpp.
#pragma once

#include <filesystem>

namespace sparsering {

/// `<target>.tmp.<pid of this process>`.
std::filesystem::path temporary_path_for(const std::filesystem::path& target);

/// Installs the cleanup handler for SIGINT, SIGTERM and SIGHUP (signals a caller already
/// ignores stay ignored). Idempotent and thread-safe; called by the first registration.
void install_temporary_cleanup();

/// Removes every registered temporary (files, then folders) with async-signal-safe calls only;
/// what the signal handler does, for a process that ends itself early (common/time_limit.hpp).
void remove_registered_temporaries() noexcept;

/// A registration of one temporary path for removal on a signal; removing the registration
/// (destruction or release()) does not remove the path itself.
class TemporaryRegistration {
 public:
  enum class Kind { file, folder };  ///< folders are removed (rmdir) after every file
  TemporaryRegistration() = default;
  /// Registers `path`. If the table (256 entries) is full or the path longer than PATH_MAX, the
  /// path is not registered and only the normal cleanup (destructors) applies.
  TemporaryRegistration(const std::filesystem::path& path, Kind kind);
  TemporaryRegistration(TemporaryRegistration&& other) noexcept;
  TemporaryRegistration& operator=(TemporaryRegistration&& other) noexcept;
  TemporaryRegistration(const TemporaryRegistration&) = delete;
  TemporaryRegistration& operator=(const TemporaryRegistration&) = delete;
  ~TemporaryRegistration() { release(); }
  /// Drops the registration (after a rename made the temporary permanent, or after removing it).
  void release() noexcept;
  /// True while registered (tests).
  bool registered() const { return slot_ >= 0; }

 private:
  int slot_ = -1;
};

/// Removes `<target>.tmp.<pid>` files and folders beside `target` whose pid is not a live
/// process (kill(pid, 0) fails with ESRCH). Returns how many were removed. Never throws: a
/// temporary that cannot be removed is left alone.
int remove_stale_temporaries(const std::filesystem::path& target) noexcept;

}  // namespace sparsering
