// Chakra export: every trace parses back with the generated protobuf classes; node counts per
// rank derived by hand for flat and hierarchical rings, forward and backward; compute of step t
// waits for the receive of step t; every send has exactly one matching receive (source, tag,
// size); and an executor that runs one transfer at a time per rank (as ASTRA-sim does) finishes
// every node, i.e. the traces cannot deadlock.
#include "tuner/export/chakra/chakra_export.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <tuple>

#include "export_test_util.hpp"
#include "tuner/export/chakra/chakra_stream.hpp"
#include "tuner/export/chakra/et_def.pb.h"
#include "tuner/export/plan_groups.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

using ChakraProtoMsg::Node;

struct RankNodes {
  ChakraProtoMsg::GlobalMetadata metadata;
  std::vector<Node> nodes;
};

const ChakraProtoMsg::AttributeProto* attr(const Node& node, const std::string& name) {
  for (const auto& a : node.attr()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

std::vector<RankNodes> parse_traces(const ExportBundle& bundle, int64_t world) {
  std::vector<RankNodes> ranks(static_cast<size_t>(world));
  for (int64_t g = 0; g < world; ++g) {
    const ExportFile* file = bundle.find("chakra/trace." + std::to_string(g) + ".et");
    EXPECT_NE(file, nullptr) << g;
    if (file == nullptr) continue;
    DelimitedReader reader(file->bytes);
    EXPECT_TRUE(reader.next(ranks[static_cast<size_t>(g)].metadata));
    Node node;
    while (reader.next(node)) ranks[static_cast<size_t>(g)].nodes.push_back(node);
  }
  return ranks;
}

std::map<ChakraProtoMsg::NodeType, int> count_types(const RankNodes& rank) {
  std::map<ChakraProtoMsg::NodeType, int> counts;
  for (const Node& node : rank.nodes) ++counts[node.type()];
  return counts;
}

StepDurations random_durations(const PlanConfig& plan, bool backward, std::mt19937_64& rng) {
  StepDurations d;
  auto matrix = [&] {
    std::vector<std::vector<int64_t>> m(static_cast<size_t>(plan.world_size()));
    for (auto& row : m) {
      for (int64_t t = 0; t < plan.context_parallel; ++t) row.push_back(static_cast<int64_t>(rng() % 3'000'000));
    }
    return m;
  };
  d.forward_ns = {matrix()};
  if (backward) d.backward_ns = {matrix()};
  return d;
}

using MessageKey = std::tuple<int64_t, int64_t, int64_t>;  // (src, dst, tag)

// Runs every rank's nodes: dependencies first; at most one transfer in flight per rank, issued in
// id order among the ready ones (ASTRA-sim's resource rule); a send completes when issued, a
// receive once its send was issued. Returns the number of nodes that never ran.
size_t run_one_transfer_at_a_time(const std::vector<RankNodes>& ranks) {
  const size_t world = ranks.size();
  std::vector<std::vector<bool>> done(world);
  std::vector<std::optional<size_t>> in_flight(world);
  std::set<MessageKey> sent;
  for (size_t g = 0; g < world; ++g) done[g].assign(ranks[g].nodes.size(), false);
  auto key = [](const Node& n) {
    return MessageKey{attr(n, "comm_src")->int32_val(), attr(n, "comm_dst")->int32_val(), attr(n, "comm_tag")->int32_val()};
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t g = 0; g < world; ++g) {
      if (in_flight[g] && sent.count(key(ranks[g].nodes[*in_flight[g]]))) {
        done[g][*in_flight[g]] = true;
        in_flight[g].reset();
        progress = true;
      }
      for (size_t i = 0; i < ranks[g].nodes.size(); ++i) {
        const Node& n = ranks[g].nodes[i];
        if (done[g][i] || (in_flight[g] && *in_flight[g] == i)) continue;
        bool ready = true;
        for (const auto dep : n.data_deps()) ready = ready && done[g][dep];
        if (!ready) continue;
        if (n.type() == ChakraProtoMsg::COMP_NODE) {
          done[g][i] = true;
          progress = true;
        } else if (!in_flight[g]) {
          if (n.type() == ChakraProtoMsg::COMM_SEND_NODE) {
            sent.insert(key(n));
            done[g][i] = true;
          } else {
            in_flight[g] = i;
          }
          progress = true;
        }
      }
    }
  }
  size_t left = 0;
  for (const auto& d : done) left += static_cast<size_t>(std::count(d.begin(), d.end(), false));
  return left;
}

void check_messages_match(const std::vector<RankNodes>& ranks, int64_t kv_bytes, int64_t dkv_bytes) {
  std::map<MessageKey, int64_t> sends;
  std::map<MessageKey, int64_t> recvs;
  for (size_t g = 0; g < ranks.size(); ++g) {
    for (const Node& n : ranks[g].nodes) {
      if (n.type() != ChakraProtoMsg::COMM_SEND_NODE && n.type() != ChakraProtoMsg::COMM_RECV_NODE) continue;
      const int64_t src = attr(n, "comm_src")->int32_val();
      const int64_t dst = attr(n, "comm_dst")->int32_val();
      const MessageKey k{src, dst, attr(n, "comm_tag")->int32_val()};
      const int64_t size = attr(n, "comm_size")->int64_val();
      EXPECT_TRUE(size == kv_bytes || size == dkv_bytes) << size;
      EXPECT_FALSE(attr(n, "is_cpu_op")->bool_val());
      EXPECT_FALSE(attr(n, "pg_name")->string_val().empty());
      auto& side = n.type() == ChakraProtoMsg::COMM_SEND_NODE ? sends : recvs;
      EXPECT_EQ(n.type() == ChakraProtoMsg::COMM_SEND_NODE ? src : dst, static_cast<int64_t>(g));
      EXPECT_TRUE(side.emplace(k, size).second) << "duplicate message " << src << "->" << dst;
    }
  }
  EXPECT_EQ(sends, recvs);
}

TEST(ChakraExport, FlatRingForwardAndBackward) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  test::PlanSpec spec;
  const test::TestPlan t(spec, 1, 4);
  const StepDurations durations = random_durations(t.plan, true, rng);
  const ExportBundle bundle = export_chakra(t.input(), durations, 1);
  const auto ranks = parse_traces(bundle, 4);
  // K/V hop: 2 x 64 tokens x 4 KV heads x 64 x 2 bytes; dK/dV in fp32.
  EXPECT_EQ(kv_hop_bytes(t.plan, t.model), 65536);
  EXPECT_EQ(dkv_hop_bytes(t.plan, t.model), 131072);
  for (int64_t g = 0; g < 4; ++g) {
    const RankNodes& r = ranks[static_cast<size_t>(g)];
    EXPECT_EQ(r.metadata.version(), "1.0.0");
    auto counts = count_types(r);
    // Forward: 4 computes, 3 receives, 3 sends. Backward: the same plus 3 accumulator forwards
    // (sent and received) and one return each way.
    EXPECT_EQ(counts[ChakraProtoMsg::COMP_NODE], 8);
    EXPECT_EQ(counts[ChakraProtoMsg::COMM_SEND_NODE], 3 + 3 + 3 + 1);
    EXPECT_EQ(counts[ChakraProtoMsg::COMM_RECV_NODE], 3 + 3 + 3 + 1);
    int step = 0;
    for (const Node& n : r.nodes) {
      EXPECT_EQ(n.id(), static_cast<uint64_t>(&n - r.nodes.data()));
      if (n.type() != ChakraProtoMsg::COMP_NODE || n.name().find(".fwd.") == std::string::npos) continue;
      const int64_t ns = durations.forward_ns[0][static_cast<size_t>(g)][static_cast<size_t>(step)];
      EXPECT_EQ(attr(n, "duration_ns")->int64_val(), ns);
      EXPECT_EQ(n.duration_micros(), static_cast<uint64_t>((ns + 500) / 1000));
      if (step >= 1) {
        // Compute of step t waits for the receive of step t, from the ring predecessor.
        bool waits_for_recv = false;
        for (const auto dep : n.data_deps()) {
          const Node& d = r.nodes[dep];
          if (d.type() == ChakraProtoMsg::COMM_RECV_NODE && d.name() == "L0.fwd.kv_recv.s" + std::to_string(step) + ".lvl0") {
            waits_for_recv = true;
            EXPECT_EQ(attr(d, "comm_src")->int32_val(), (g + 3) % 4);
          }
        }
        EXPECT_TRUE(waits_for_recv) << n.name();
      }
      ++step;
    }
    EXPECT_EQ(step, 4);
  }
  check_messages_match(ranks, 65536, 131072);
  EXPECT_EQ(run_one_transfer_at_a_time(ranks), 0u);
  const auto groups = nlohmann::json::parse(bundle.find("chakra/comm_group.json")->bytes);
  EXPECT_EQ(groups["1"], (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(ChakraExport, HierarchicalRingPostsTheOuterHopFirst) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  test::PlanSpec spec;
  spec.levels = {{2, "nvlink"}, {2, "infiniband"}};
  const test::TestPlan t(spec, 2, 2);
  const ExportBundle bundle = export_chakra(t.input(), random_durations(t.plan, true, rng), 2);
  const auto ranks = parse_traces(bundle, 4);
  for (const RankNodes& r : ranks) {
    auto counts = count_types(r);
    // Per layer: forward sends at step 0 (outer and inner) and step 2 (inner); receives at steps
    // 1, 2, 3. Backward adds accumulator forwards at steps 0 and 2, receives at 1 and 3, and two
    // returns each way. Two layers.
    EXPECT_EQ(counts[ChakraProtoMsg::COMP_NODE], 2 * 8);
    EXPECT_EQ(counts[ChakraProtoMsg::COMM_SEND_NODE], 2 * (3 + 3 + 2 + 2));
    EXPECT_EQ(counts[ChakraProtoMsg::COMM_RECV_NODE], 2 * (3 + 3 + 2 + 2));
    // The first two nodes are layer 0's step-0 sends, outer before inner.
    ASSERT_GE(r.nodes.size(), 2u);
    EXPECT_EQ(r.nodes[0].name(), "L0.fwd.kv_send.s0.lvl1");
    EXPECT_EQ(r.nodes[1].name(), "L0.fwd.kv_send.s0.lvl0");
  }
  // pg names: level-1 rings are {0, 2} and {1, 3}; the outer send of rank 0 goes to rank 2.
  const auto groups = nlohmann::json::parse(bundle.find("chakra/comm_group.json")->bytes);
  const Node& outer = ranks[0].nodes[0];
  EXPECT_EQ(attr(outer, "comm_dst")->int32_val(), 2);
  const auto pg = groups[attr(outer, "pg_name")->string_val()];
  EXPECT_EQ(pg, (std::vector<int64_t>{0, 2}));
  check_messages_match(ranks, kv_hop_bytes(t.plan, t.model), dkv_hop_bytes(t.plan, t.model));
  EXPECT_EQ(run_one_transfer_at_a_time(ranks), 0u);
}

TEST(ChakraExport, RandomHierarchiesNeverDeadlock) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const std::vector<std::vector<std::pair<int64_t, std::string>>> shapes = {
      {{8, "nvlink"}}, {{4, "nvlink"}, {2, "nvlink"}}, {{2, "nvlink"}, {1, "nvlink"}, {4, "nvlink"}},
      {{2, "nvlink"}, {2, "nvlink"}, {2, "nvlink"}}};
  for (const auto& levels : shapes) {
    test::PlanSpec spec;
    spec.context_parallel = 8;
    spec.levels = levels;
    spec.order = {0, 1, 2, 3, 4, 5, 6, 7};
    std::shuffle(spec.order.begin(), spec.order.end(), rng);
    const test::TestPlan t(spec, 1, 8);
    const auto ranks = parse_traces(export_chakra(t.input(), random_durations(t.plan, true, rng), 1), 8);
    size_t comps = 0;
    for (const auto& r : ranks) comps += static_cast<size_t>(count_types(r)[ChakraProtoMsg::COMP_NODE]);
    EXPECT_EQ(comps, 8u * 8u * 2u);
    check_messages_match(ranks, kv_hop_bytes(t.plan, t.model), dkv_hop_bytes(t.plan, t.model));
    EXPECT_EQ(run_one_transfer_at_a_time(ranks), 0u);
  }
}

TEST(ChakraExport, RefusesDurationsOfTheWrongShape) {
  const test::TestPlan t(test::PlanSpec{}, 1, 4);
  StepDurations d;
  d.forward_ns = {StepMatrix(3, std::vector<int64_t>(4, 1000))};
  test::expect_input_error([&] { export_chakra(t.input(), d, 1); }, {"3 rows", "4 ranks"});
  d.forward_ns = {StepMatrix(4, std::vector<int64_t>(4, 1000))};
  d.forward_ns[0][2][1] = -5;
  test::expect_input_error([&] { export_chakra(t.input(), d, 1); }, {"layer 0 rank 2 step 1 is negative"});
  d.forward_ns[0][2][1] = 5;
  test::expect_input_error([&] { export_chakra(t.input(), d, -1); }, {"layers"});
  test::expect_input_error([&] { export_chakra(t.input(), StepDurations{}, 1); }, {"no forward pass"});
}

TEST(ChakraExport, LayersComeFromTheDurations) {
  const test::TestPlan t(test::PlanSpec{}, 1, 4);
  StepDurations d;
  d.forward_ns = {StepMatrix(4, std::vector<int64_t>(4, 1000)), StepMatrix(4, std::vector<int64_t>(4, 7000))};
  const auto ranks = parse_traces(export_chakra(t.input(), d, 0), 4);
  int layer1 = 0;
  for (const Node& n : ranks[0].nodes) {
    if (n.type() == ChakraProtoMsg::COMP_NODE && n.name().rfind("L1.", 0) == 0) {
      EXPECT_EQ(n.duration_micros(), 7u);
      ++layer1;
    }
  }
  EXPECT_EQ(layer1, 4);
  EXPECT_EQ(count_types(ranks[0])[ChakraProtoMsg::COMP_NODE], 8);
  test::expect_input_error([&] { export_chakra(t.input(), d, 3); }, {"3 layers asked", "hold 2"});
  // One layer of durations is repeated; the second layer starts after the first ends.
  d.forward_ns.pop_back();
  const auto repeated = parse_traces(export_chakra(t.input(), d, 3), 4);
  EXPECT_EQ(count_types(repeated[1])[ChakraProtoMsg::COMP_NODE], 12);
  EXPECT_EQ(run_one_transfer_at_a_time(repeated), 0u);
}

}  // namespace
}  // namespace sparsering
