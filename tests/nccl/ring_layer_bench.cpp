// Times one sparse attention layer on the GPUs of this host through the NCCL ring runtime and
// prints a short table (medians over iterations, CUDA events): forward / backward wall, per-step
// compute, exposed communication, shuffle and index build. Kept sets are synthetic, shaped like
// the published Qwen2.5-3B budgets (docs/algorithm.md section 2): sinks + ~1000 verticals, a local window
// + ~2000 distant slashes per head. Run by kernels/bench/run_rings_on_device.sh.
// Usage: ring_layer_bench [--tokens N] [--levels a,b] [--order g,g,...] [--layout striped|zigzag|contiguous]
//                         [--q-heads H] [--kv-heads H] [--iterations I] [--label TEXT]
//                         [--id-file PATH --local-ranks g,g [--write-id 1]]   (one process per emulated node)
// With an id file the process drives only its local ranks (e.g. one process per NCCL_HOSTID);
// rows of the other ranks print as zeros.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "kernels/nccl/ring_attention_layer.hpp"

namespace {

std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) values.push_back(std::stoll(item));
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sparsering;
  int64_t tokens = 262144;
  std::vector<int64_t> levels;
  std::vector<int32_t> order;
  std::string layout = "striped";
  std::string label = "layer";
  int32_t q_heads = 16;
  int32_t kv_heads = 2;
  int32_t iterations = 3;
  int32_t ranks = 0;
  std::string id_file;
  std::vector<int32_t> local_ranks;
  bool write_id = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const std::string value = argv[i + 1];
    if (key == "--tokens") tokens = std::stoll(value);
    else if (key == "--levels") levels = parse_list(value);
    else if (key == "--order") for (const auto g : parse_list(value)) order.push_back(static_cast<int32_t>(g));
    else if (key == "--layout") layout = value;
    else if (key == "--q-heads") q_heads = std::stoi(value);
    else if (key == "--kv-heads") kv_heads = std::stoi(value);
    else if (key == "--iterations") iterations = std::stoi(value);
    else if (key == "--ranks") ranks = std::stoi(value);
    else if (key == "--label") label = value;
    else if (key == "--id-file") id_file = value;
    else if (key == "--local-ranks") for (const auto g : parse_list(value)) local_ranks.push_back(static_cast<int32_t>(g));
    else if (key == "--write-id") write_id = value == "1";
    else {
      std::fprintf(stderr, "unknown option %s\n", key.c_str());
      return 2;
    }
  }
  try {
    if (ranks == 0) {
      ranks = 1;
      for (const auto l : levels) ranks *= static_cast<int32_t>(l);
      if (levels.empty()) ranks = 4;
    }
    RingLayerProblem p;
    const LayoutKind kind = parse_layout_kind(layout);
    p.layout = make_token_layout(kind, tokens, ranks, kind == LayoutKind::striped ? 64 : 0);
    p.level_sizes = levels;
    p.ring_order = order;
    p.shape = AttentionShape{1, q_heads, kv_heads, 128, p.layout.local_len(), p.layout.local_len()};
    p.pattern = PatternSource::kept_sets;
    p.backward = true;
    p.warmup = 1;
    p.iterations = iterations;
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<int64_t> any(0, tokens - 1);
    std::vector<KeptRow> rows;
    for (int32_t r = 0; r < q_heads; ++r) {
      std::set<int32_t> v{0, 1, 2, 3};
      while (v.size() < 1000) v.insert(static_cast<int32_t>(any(rng)));
      std::set<int32_t> s;
      for (int32_t d = 0; d < 512; ++d) s.insert(d);
      while (s.size() < 2560) s.insert(static_cast<int32_t>(any(rng)));
      rows.push_back(KeptRow{std::vector<int32_t>(v.begin(), v.end()), std::vector<int32_t>(s.begin(), s.end())});
    }
    p.kept = KeptSet(tokens, std::move(rows));
    RingRuntimeOptions options;
    options.timeout_s = 120.0;
    options.id_file = id_file;
    options.local_ranks = local_ranks;
    options.write_id = write_id;
    const RingLayerMeasurement m = run_ring_attention_layer(p, options);
    const auto w = static_cast<size_t>(m.ranks);
    std::printf("== %s: %s N=%lld W=%d levels", label.c_str(), layout.c_str(), static_cast<long long>(tokens), m.ranks);
    for (const auto l : levels) std::printf(" %lld", static_cast<long long>(l));
    std::printf(" (Hq %d, Hkv %d, D 128, bf16)\n", q_heads, kv_heads);
    for (const auto* pass : {&m.forward, &m.backward}) {
      const bool fwd = pass == &m.forward;
      std::printf("%s  wall %.2f ms  exposed comm %.2f ms\n", fwd ? "forward " : "backward", pass->wall_ms,
                  pass->exposed_comm_ms);
      std::printf("  rank\\step");
      for (size_t t = 0; t < w; ++t) std::printf("  compute/wait t%zu", t);
      std::printf("   total\n");
      for (size_t g = 0; g < w; ++g) {
        std::printf("  %9zu", g);
        for (size_t t = 0; t < w; ++t) {
          std::printf("  %7.2f/%6.2f", pass->compute_ms[g * w + t], pass->recv_wait_ms[g * w + t]);
        }
        std::printf("  %7.2f\n", pass->rank_total_ms[g]);
      }
    }
    int64_t tiles = 0;
    int64_t columns = 0;
    for (size_t c = 0; c < m.index_tiles.size(); ++c) {
      tiles += m.index_tiles[c];
      columns += m.index_columns[c];
    }
    std::printf("shuffle %.2f ms  pattern upload %.2f ms  index build %.2f ms  kept tiles %lld  columns %lld\n",
                m.shuffle_ms, m.estimate_ms, m.index_build_ms, static_cast<long long>(tiles),
                static_cast<long long>(columns));
    std::printf("SUMMARY %s fwd_ms %.2f bwd_ms %.2f fwd_exposed_ms %.2f bwd_exposed_ms %.2f\n", label.c_str(),
                m.forward.wall_ms, m.backward.wall_ms, m.forward.exposed_comm_ms, m.backward.exposed_comm_ms);
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "input error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
