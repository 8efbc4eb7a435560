// The signal-time cleanup table and the stale-temporary sweep (guarantees in temporary_paths.hpp).
// The handler may run on any thread at any moment, so the table is a fixed array of slots whose
// state is a lock-free atomic: a slot's path is written while the slot is `claimed` and only
// read by the handler once it is `file` or `folder`.
#include "common/temporary_paths.hpp"

#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <system_error>

#include "common/error.hpp"

namespace sparsering {
namespace {

enum SlotState : int { kFree = 0, kClaimed, kFile, kFolder };

struct Slot {
  std::atomic<int> state{kFree};
  char path[PATH_MAX] = {};
};

static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free state");

constexpr int kSlots = 256;
std::array<Slot, kSlots> g_slots;
constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};

extern "C" void remove_temporaries_and_reraise(int signal_number) {
  const int saved_errno = errno;
  remove_registered_temporaries();
  // Default action, then deliver the signal again: it is blocked while this handler runs, so it
  // arrives (and ends the process with the usual status) as soon as the handler returns.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  ::sigaction(signal_number, &default_action, nullptr);
  ::raise(signal_number);
  errno = saved_errno;
}

}  // namespace

void remove_registered_temporaries() noexcept {
  for (Slot& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) == kFile) ::unlink(slot.path);
  }
  for (Slot& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) == kFolder) ::rmdir(slot.path);
  }
}

std::filesystem::path temporary_path_for(const std::filesystem::path& target) {
  std::filesystem::path temp = target;
  temp += str(".tmp.", ::getpid());
  return temp;
}

void install_temporary_cleanup() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const int signal_number : kSignals) {
      struct sigaction previous {};
      if (::sigaction(signal_number, nullptr, &previous) != 0) continue;
      if (previous.sa_handler == SIG_IGN) continue;  // e.g. SIGHUP under nohup
      struct sigaction action {};
      action.sa_handler = remove_temporaries_and_reraise;
      sigemptyset(&action.sa_mask);
      for (const int other : kSignals) sigaddset(&action.sa_mask, other);  // one cleanup at a time
      ::sigaction(signal_number, &action, nullptr);
    }
  });
}

TemporaryRegistration::TemporaryRegistration(const std::filesystem::path& path, Kind kind) {
  install_temporary_cleanup();
  const std::string text = path.string();
  if (text.size() >= PATH_MAX) return;
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    Slot& slot = g_slots[static_cast<size_t>(i)];
    if (slot.state.compare_exchange_strong(expected, kClaimed, std::memory_order_acq_rel)) {
      std::memcpy(slot.path, text.c_str(), text.size() + 1);
      slot.state.store(kind == Kind::file ? kFile : kFolder, std::memory_order_release);
      slot_ = i;
      return;
    }
  }
}

TemporaryRegistration::TemporaryRegistration(TemporaryRegistration&& other) noexcept : slot_(other.slot_) {
  other.slot_ = -1;
}

TemporaryRegistration& TemporaryRegistration::operator=(TemporaryRegistration&& other) noexcept {
  if (this != &other) {
    release();
    slot_ = other.slot_;
    other.slot_ = -1;
  }
  return *this;
}

void TemporaryRegistration::release() noexcept {
  if (slot_ < 0) return;
  g_slots[static_cast<size_t>(slot_)].state.store(kFree, std::memory_order_release);
  slot_ = -1;
}

int remove_stale_temporaries(const std::filesystem::path& target) noexcept {
  int removed = 0;
  try {
    const std::filesystem::path folder = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
    const std::string prefix = target.filename().string() + ".tmp.";
    if (prefix.size() <= 5) return 0;  // no file name: nothing to match
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string digits = name.substr(prefix.size());
      if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
      const auto pid = static_cast<pid_t>(std::stol(digits));
      if (pid <= 0 || pid == ::getpid()) continue;
      // Only a pid that names no process is proof of death; EPERM means someone else's live process.
      if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
      std::error_code remove_error;
      if (std::filesystem::remove_all(entry.path(), remove_error) > 0 && !remove_error) ++removed;
    }
  } catch (...) {
    // A sweep is a courtesy: a folder that cannot be listed must not stop the write.
  }
  return removed;
}

}  // namespace sparsering
