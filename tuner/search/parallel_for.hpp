// A minimal parallel loop for the tuner: runs body(i) for i in [0, count) on up to `threads`
// threads, each taking the next index from a shared counter. Results must be written to
// per-index slots so they never depend on the thread count. If bodies throw, the exception of the
// lowest failing index is rethrown after all threads finish (deterministic error reporting).
// Tested in tests/tuner_search/plan_search_test.cpp (thread-count independence).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace sparsering {

/// Runs body(state, i) for every i in [0, count) on min(threads, count) threads (threads < 1
/// means 1), each thread with its own `state = make_state()` kept across the indices it takes
/// (a cache that must not be rebuilt per index).
template <typename MakeState, typename Body>
void parallel_for_with_state(int64_t count, int threads, const MakeState& make_state, const Body& body) {
  if (count <= 0) return;
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(threads, count));
  std::atomic<int64_t> next{0};
  std::mutex mutex;
  int64_t failed_index = -1;
  std::exception_ptr failure;
  const auto work = [&] {
    auto state = make_state();
    for (int64_t i = next++; i < count; i = next++) {
      try {
        body(state, i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (failed_index < 0 || i < failed_index) {
          failed_index = i;
          failure = std::current_exception();
        }
      }
    }
  };
  if (workers == 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    pool.reserve(static_cast<size_t>(workers - 1));
    for (int64_t t = 1; t < workers; ++t) pool.emplace_back(work);
    work();
    for (std::thread& t : pool) t.join();
  }
  if (failure) std::rethrow_exception(failure);
}

/// Runs body(i) for every i in [0, count) on min(threads, count) threads (threads < 1 means 1).
template <typename Body>
void parallel_for(int64_t count, int threads, const Body& body) {
  parallel_for_with_state(count, threads, [] { return 0; }, [&](int, int64_t i) { body(i); });
}

}  // namespace sparsering
