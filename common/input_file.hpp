// The one way the project reads a file a user named: only regular files (a folder, FIFO, device
// or socket is refused with a message, and a FIFO is opened without blocking so it cannot hang
// the program), and never more bytes than a stated cap, checked on the opened descriptor before
// anything is read, so /dev/zero or a 10 GB file given as a config fails at once.
// Tested in tests/common/input_file_test.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace sparsering {

/// Largest text input (configs, priors, durations) read_file accepts by default: 64 MiB.
inline constexpr int64_t kDefaultTextFileCapBytes = int64_t{64} << 20;

/// An opened regular file for reading, with its size at the time it was opened.
class InputFile {
 public:
  /// Opens `path` (symbolic links followed) read-only. Throws InputError naming the path and the
  /// reason when it does not exist, cannot be opened, is not a regular file, or holds more than
  /// `max_bytes` bytes. Never blocks, whatever `path` names. Precondition: max_bytes >= 0.
  InputFile(const std::filesystem::path& path, int64_t max_bytes);
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  /// Size in bytes, from fstat on the opened descriptor.
  int64_t size_bytes() const { return size_bytes_; }
  /// Reads up to `max_count` bytes into `out`; returns how many (0 at the end of the file).
  /// Throws InputError naming the path on a read error.
  int64_t read_some(char* out, int64_t max_count);
  /// Reads exactly `count` bytes into `out`; throws InputError if the file ends first (it shrank
  /// while being read) or a read fails.
  void read_exactly(char* out, int64_t count);
  /// Reads exactly `count` bytes starting at byte `offset` of the file into `out`, without moving
  /// the read position of read_some. Throws InputError if the range passes the end of the file or
  /// a read fails. Preconditions: offset >= 0, count >= 0.
  void read_exactly_at(int64_t offset, char* out, int64_t count);

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  int64_t size_bytes_ = 0;
};

/// Reads a whole regular file of at most `max_bytes` bytes (exactly the size fstat reported when
/// it was opened). Throws InputError naming the path and why (missing, a folder / FIFO / device,
/// too large, unreadable).
std::string read_file(const std::filesystem::path& path, int64_t max_bytes = kDefaultTextFileCapBytes);

/// Throws InputError (as InputFile does) unless `path` is a regular file that can be opened. For
/// readers that open the file themselves: call it first so a FIFO or device is refused.
void require_regular_file(const std::filesystem::path& path);

}  // namespace sparsering
