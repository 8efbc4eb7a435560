// Opening and reading user-named input files (guarantees in input_file.hpp).
#include "common/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "common/error.hpp"
#include "common/file_kind.hpp"

namespace sparsering {
namespace {

std::string not_regular(const std::filesystem::path& path, mode_t mode) {
  return str("cannot read ", path.string(), ": it is ", describe_file_kind(mode), ", not a regular file");
}

}  // namespace

InputFile::InputFile(const std::filesystem::path& path, int64_t max_bytes) : path_(path) {
  // stat first so a FIFO or device is refused without opening it at all (opening some devices
  // has side effects); the fstat below closes the race with a file swapped in between.
  struct stat before {};
  if (::stat(path_.c_str(), &before) != 0) {
    throw InputError(str("cannot open ", path_.string(), ": ", std::strerror(errno)));
  }
  if (!S_ISREG(before.st_mode)) throw InputError(not_regular(path_, before.st_mode));
  // O_NONBLOCK: if a FIFO replaced the file since the stat, open must not wait for a writer.
  fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd_ < 0) throw InputError(str("cannot open ", path_.string(), ": ", std::strerror(errno)));
  struct stat opened {};
  if (::fstat(fd_, &opened) != 0) {
    const int error = errno;
    ::close(fd_);
    throw InputError(str("cannot read ", path_.string(), ": ", std::strerror(error)));
  }
  if (!S_ISREG(opened.st_mode)) {
    ::close(fd_);
    throw InputError(not_regular(path_, opened.st_mode));
  }
  size_bytes_ = static_cast<int64_t>(opened.st_size);
  if (size_bytes_ > max_bytes) {
    ::close(fd_);
    throw InputError(str("cannot read ", path_.string(), ": it holds ", size_bytes_, " bytes, more than the ", max_bytes,
                         " bytes allowed for this input"));
  }
  // Regular files ignore O_NONBLOCK, but clear it so reads behave as documented everywhere.
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

int64_t InputFile::read_some(char* out, int64_t max_count) {
  for (;;) {
    const ssize_t got = ::read(fd_, out, static_cast<size_t>(max_count));
    if (got >= 0) return static_cast<int64_t>(got);
    if (errno != EINTR) throw InputError(str("cannot read ", path_.string(), ": ", std::strerror(errno)));
  }
}

void InputFile::read_exactly(char* out, int64_t count) {
  int64_t done = 0;
  while (done < count) {
    const int64_t got = read_some(out + done, count - done);
    if (got == 0) {
      throw InputError(str("cannot read ", path_.string(), ": it ended after ", done, " of ", count,
                           " bytes (changed while being read?)"));
    }
    done += got;
  }
}

void InputFile::read_exactly_at(int64_t offset, char* out, int64_t count) {
  int64_t done = 0;
  while (done < count) {
    const ssize_t got = ::pread(fd_, out + done, static_cast<size_t>(count - done), static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw InputError(str("cannot read ", path_.string(), ": ", std::strerror(errno)));
    if (got == 0) {
      throw InputError(str("cannot read ", path_.string(), ": bytes [", offset, ", ", offset + count,
                           ") pass its end after ", done, " of ", count, " bytes (changed while being read?)"));
    }
    done += got;
  }
}

std::string read_file(const std::filesystem::path& path, int64_t max_bytes) {
  InputFile file(path, max_bytes);
  std::string bytes(static_cast<size_t>(file.size_bytes()), '\0');
  file.read_exactly(bytes.data(), file.size_bytes());
  return bytes;
}

void require_regular_file(const std::filesystem::path& path) {
  const InputFile probe(path, std::numeric_limits<int64_t>::max());
}

}  // namespace sparsering
