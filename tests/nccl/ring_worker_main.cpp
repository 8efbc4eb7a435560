// A one-rank process of a small ring layer, for tests/nccl/nccl_world_test.cpp: the processes
// share the NCCL id through a file; one of them can kill itself (SIGKILL) after queuing a given
// forward ring step, so the test checks that the survivor ends with a clear error in time.
// Usage: nccl_ring_worker RANK RANKS ID_FILE DIE_AT_STEP(-1 = never) TIMEOUT_S
// Exit codes: 0 done, 3 RingError (message on stderr), 1 other error, 2 bad arguments.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "common/error.hpp"
#include "kernels/nccl/ring_attention_layer.hpp"

int main(int argc, char** argv) {
  using namespace sparsering;
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s RANK RANKS ID_FILE DIE_AT_STEP TIMEOUT_S\n", argv[0]);
    return 2;
  }
  const int32_t rank = std::atoi(argv[1]);
  const int32_t ranks = std::atoi(argv[2]);
  const std::string id_file = argv[3];
  const int32_t die_at = std::atoi(argv[4]);
  const double timeout_s = std::atof(argv[5]);
  try {
    RingLayerProblem problem;
    problem.layout = make_token_layout(LayoutKind::contiguous, 2048 * int64_t{ranks}, ranks);
    problem.shape = AttentionShape{1, 2, 1, 64, 2048, 2048};
    problem.pattern = PatternSource::dense;
    problem.backward = true;
    problem.iterations = 2;
    RingRuntimeOptions options;
    options.timeout_s = timeout_s;
    options.id_file = id_file;
    options.local_ranks = {rank};
    options.write_id = rank == 0;
    options.after_step = [&](int32_t, RingPass pass, int32_t step) {
      if (pass == RingPass::forward && step == die_at) std::raise(SIGKILL);
    };
    (void)run_ring_attention_layer(problem, options);
    std::printf("rank %d done\n", rank);
    return 0;
  } catch (const RingError& e) {
    std::fprintf(stderr, "RingError: %s\n", e.what());
    return 3;
  } catch (const InputError& e) {
    std::fprintf(stderr, "InputError: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
