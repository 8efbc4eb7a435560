// Running the built `sparsering` binary from the CLI tests: once to completion (exit code and
// output, or also its own peak memory), or spawned in the background (to signal it, or under a
// resource limit). Used by the tests of tests/cli/.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace sparsering::test {

struct CliResult {
  int code = -1;       ///< exit status, or -1 when killed by a signal
  std::string output;  ///< stdout and stderr together
  double seconds = 0;  ///< wall time
};

/// Runs `sparsering <args>` (already shell-quoted words) through /bin/sh and waits. With
/// `timeout_s` > 0 coreutils `timeout` ends a run that hangs (exit code 124), so a hang fails the
/// test instead of stalling it; no test asserts how fast a run was.
inline CliResult run_cli(const std::string& args, int timeout_s = 0) {
  const std::string prefix = timeout_s > 0 ? "timeout " + std::to_string(timeout_s) + " " : std::string();
  const std::string command = prefix + std::string(SPARSERING_CLI) + " " + args + " 2>&1";
  CliResult result;
  const auto start = std::chrono::steady_clock::now();
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

/// Starts `sparsering` with `args` (one argument each, no shell) in the background, stdout and
/// stderr to `log_path`. With `file_size_limit_bytes` > 0 the child runs under RLIMIT_FSIZE with
/// SIGXFSZ ignored, so writes past the limit fail with EFBIG. Returns the pid (or -1).
inline pid_t spawn_cli(const std::vector<std::string>& args, const std::string& log_path,
                       long long file_size_limit_bytes = 0) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  FILE* log = std::freopen(log_path.c_str(), "w", stdout);
  if (log != nullptr) ::dup2(::fileno(stdout), 2);
  if (file_size_limit_bytes > 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{static_cast<rlim_t>(file_size_limit_bytes), static_cast<rlim_t>(file_size_limit_bytes)};
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  std::vector<char*> argv;
  std::string program = SPARSERING_CLI;
  argv.push_back(program.data());
  std::vector<std::string> copies = args;
  for (std::string& a : copies) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(program.c_str(), argv.data());
  ::_exit(127);
}

/// Waits for `pid`; returns the raw wait status.
inline int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

/// A run of `sparsering` measured on its own: exit status, output and peak resident memory.
struct MeasuredRun {
  int code = -1;         ///< exit status, or -1 when killed by a signal
  std::string output;    ///< stdout and stderr together
  double peak_gib = 0;   ///< the child's peak resident set (wait4's ru_maxrss)
};

/// Runs `sparsering` with `args` (no shell), its output through `log_path`, and waits for it alone,
/// so the peak is this run's and not the largest of every child so far.
inline MeasuredRun run_cli_measured(const std::vector<std::string>& args, const std::string& log_path) {
  MeasuredRun run;
  const pid_t pid = spawn_cli(args, log_path);
  if (pid <= 0) return run;
  int status = 0;
  rusage usage{};
  while (::wait4(pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) return run;
  }
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.peak_gib = static_cast<double>(usage.ru_maxrss) / (1024.0 * 1024.0);  // ru_maxrss is KiB
  if (FILE* log = std::fopen(log_path.c_str(), "r")) {
    char buffer[4096];
    size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof buffer, log)) > 0) run.output.append(buffer, n);
    std::fclose(log);
  }
  return run;
}

inline std::string source_path(const std::string& rel) { return std::string(SPARSERING_SOURCE_DIR) + "/" + rel; }

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace sparsering::test
