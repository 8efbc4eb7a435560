// A test helper (not a user tool): runs the project's C++ CPU oracles on one problem so that
// tests/python/op_cpu_test.py can compare the torch CPU path of the sparsering package with them.
//
//   vs_oracle_tool DIR
//
// DIR/meta.txt holds "key value" lines: batch q_heads kv_heads head_dim seq_len layout ranks
// granularity block_q block_k last_q recall capacity scale. DIR/q.bin (B, Hq, N, D) and
// DIR/k.bin, DIR/v.bin (B, Hkv, N, D), DIR/dout.bin (B, Hq, N, D) hold bf16 bits in global token
// order. The tool deals the tokens to the ring ranks of the layout and runs, in order:
// estimate_pattern_pass1_ref per shard, estimate_pattern_combine_ref, estimate_pattern_pass2_ref
// per shard (kernels/reference/estimate_pattern_ref.hpp); the recall rule of traces/recall.hpp on
// every entry as a candidate (mass descending, ties by smaller index, never a zero mass, capped);
// build_sparse_index for every (query rank, K/V rank) step; sparse_attn_fwd_ref merged over the
// steps, attn_bwd_delta_ref and sparse_attn_bwd_ref. It writes vertical_mass.f32 and
// slash_mass.f32 ((B x Hq, N), by global key / offset), kept.txt (one line per row: vertical
// count, keys, slash count, offsets), index.txt (per step: the five arrays), and out.f32, lse.f32,
// dq.f32, dk.f32, dv.f32 per ring rank in local order ((W, B, H, N/W, D)). Exit 0, or 2 with a
// message on bad input.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "core/token_layout.hpp"
#include "kernels/attention_params.hpp"
#include "kernels/index/build_sparse_index.hpp"
#include "kernels/reference/estimate_pattern_ref.hpp"
#include "kernels/reference/pattern_candidates.hpp"
#include "kernels/reference/sparse_attn_bwd_ref.hpp"
#include "kernels/reference/sparse_attn_fwd_ref.hpp"
#include "kernels/sparse_index.hpp"
#include "traces/recall.hpp"

namespace {

using namespace sparsering;

template <typename T>
std::vector<T> read_array(const std::string& path, size_t count) {
  std::ifstream in(path, std::ios::binary);
  require(static_cast<bool>(in), "cannot open ", path);
  std::vector<T> data(count);
  in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(count * sizeof(T)));
  require(in.gcount() == static_cast<std::streamsize>(count * sizeof(T)), path, " holds fewer than ", count, " values");
  return data;
}

template <typename T>
void write_array(const std::string& path, const std::vector<T>& data) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * sizeof(T)));
  require(static_cast<bool>(out), "cannot write ", path);
}

// (B, H, N, D) global order -> (B, H, N/W, D) of one ring rank.
template <typename T>
std::vector<T> local_part(const std::vector<T>& global, int64_t bh, int64_t n, int64_t dim, const TokenLayout& layout,
                          int32_t rank) {
  const int64_t len = layout.local_len();
  std::vector<T> local(static_cast<size_t>(bh * len * dim));
  for (int64_t row = 0; row < bh; ++row) {
    for (int64_t i = 0; i < len; ++i) {
      const int64_t g = layout.global_token(rank, i);
      std::copy_n(global.begin() + (row * n + g) * dim, dim, local.begin() + (row * len + i) * dim);
    }
  }
  return local;
}

// The kept entries of one row: every index a candidate, mass descending, ties by smaller index.
std::vector<int64_t> select_row(std::span<const float> mass, double recall, int64_t capacity) {
  std::vector<int64_t> order(mass.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return mass[static_cast<size_t>(a)] > mass[static_cast<size_t>(b)]; });
  std::vector<float> sorted(mass.size());
  int64_t positive = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    sorted[i] = mass[static_cast<size_t>(order[i])];
    if (sorted[i] > 0.0f) ++positive;
  }
  const int64_t kept = recall_prefix_length(sorted, positive, recall, 0, capacity);
  std::vector<int64_t> chosen(order.begin(), order.begin() + kept);
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

int run(const std::string& dir) {
  std::map<std::string, std::string> meta;
  {
    std::ifstream in(dir + "/meta.txt");
    require(static_cast<bool>(in), "cannot open ", dir, "/meta.txt");
    std::string key, value;
    while (in >> key >> value) meta[key] = value;
  }
  auto get = [&](const char* key) {
    require(meta.count(key) == 1, "meta.txt lacks ", key);
    return meta[key];
  };
  AttentionShape shape;
  shape.batch = std::stoi(get("batch"));
  shape.q_heads = std::stoi(get("q_heads"));
  shape.kv_heads = std::stoi(get("kv_heads"));
  shape.head_dim = std::stoi(get("head_dim"));
  const int64_t n = std::stoll(get("seq_len"));
  const TokenLayout layout = make_token_layout(parse_layout_kind(get("layout")), n, std::stoi(get("ranks")),
                                               std::stoll(get("granularity")));
  const int32_t block_q = std::stoi(get("block_q"));
  const int32_t block_k = std::stoi(get("block_k"));
  const int64_t last_q = std::stoll(get("last_q"));
  const double recall = std::stod(get("recall"));
  const int64_t capacity = std::stoll(get("capacity"));
  const float scale = std::stof(get("scale"));
  const int32_t w = layout.ranks();
  const int64_t len = layout.local_len();
  const int64_t dim = shape.head_dim;
  const int64_t rows = int64_t{shape.batch} * shape.q_heads;
  const int64_t kv_rows = int64_t{shape.batch} * shape.kv_heads;

  const auto q = read_array<bf16_bits>(dir + "/q.bin", static_cast<size_t>(rows * n * dim));
  const auto k = read_array<bf16_bits>(dir + "/k.bin", static_cast<size_t>(kv_rows * n * dim));
  const auto v = read_array<bf16_bits>(dir + "/v.bin", static_cast<size_t>(kv_rows * n * dim));
  const auto dout = read_array<bf16_bits>(dir + "/dout.bin", static_cast<size_t>(rows * n * dim));

  // Estimation over the shards of the ring.
  std::vector<bf16_bits> q_last(static_cast<size_t>(rows * last_q * dim));
  for (int64_t row = 0; row < rows; ++row) {
    std::copy_n(q.begin() + (row * n + n - last_q) * dim, last_q * dim, q_last.begin() + row * last_q * dim);
  }
  std::vector<std::vector<bf16_bits>> k_local, v_local, q_local, dout_local;
  for (int32_t r = 0; r < w; ++r) {
    k_local.push_back(local_part(k, kv_rows, n, dim, layout, r));
    v_local.push_back(local_part(v, kv_rows, n, dim, layout, r));
    q_local.push_back(local_part(q, rows, n, dim, layout, r));
    dout_local.push_back(local_part(dout, rows, n, dim, layout, r));
  }
  const size_t stats = static_cast<size_t>(rows * last_q);
  std::vector<float> row_max(stats, -std::numeric_limits<float>::infinity()), row_sum(stats, 0.0f);
  EstimateParams est;
  est.shape = shape;
  est.shape.q_len = last_q;
  est.shape.kv_len = len;
  est.softmax_scale = scale;
  est.q_last = q_last.data();
  for (int32_t r = 0; r < w; ++r) {
    std::vector<float> shard_max(stats), shard_sum(stats);
    est.position = RingPosition{layout, 0, r};
    est.k = k_local[static_cast<size_t>(r)].data();
    est.row_max = shard_max.data();
    est.row_sum = shard_sum.data();
    estimate_pattern_pass1_ref(est);
    estimate_pattern_combine_ref(static_cast<int64_t>(stats), shard_max.data(), shard_sum.data(), row_max.data(),
                                 row_sum.data());
  }
  std::vector<float> slash(static_cast<size_t>(rows * n), 0.0f);
  std::vector<std::vector<float>> vertical_local(static_cast<size_t>(w), std::vector<float>(static_cast<size_t>(rows * len)));
  est.row_max = row_max.data();
  est.row_sum = row_sum.data();
  est.slash_mass = slash.data();
  for (int32_t r = 0; r < w; ++r) {
    est.position = RingPosition{layout, 0, r};
    est.k = k_local[static_cast<size_t>(r)].data();
    est.vertical_mass = vertical_local[static_cast<size_t>(r)].data();
    estimate_pattern_pass2_ref(est);
  }
  std::vector<float> vertical(static_cast<size_t>(rows * n));
  for (int64_t row = 0; row < rows; ++row) {
    std::vector<std::span<const float>> spans;
    for (int32_t r = 0; r < w; ++r) spans.emplace_back(vertical_local[static_cast<size_t>(r)].data() + row * len, static_cast<size_t>(len));
    const auto by_token = vertical_mass_by_token(layout, spans);
    std::copy(by_token.begin(), by_token.end(), vertical.begin() + row * n);
  }
  write_array(dir + "/vertical_mass.f32", vertical);
  write_array(dir + "/slash_mass.f32", slash);

  // Selection.
  std::vector<RowPattern> patterns(static_cast<size_t>(rows));
  std::ofstream kept_out(dir + "/kept.txt");
  for (int64_t row = 0; row < rows; ++row) {
    auto& p = patterns[static_cast<size_t>(row)];
    p.vertical_tokens = select_row(std::span<const float>(vertical.data() + row * n, static_cast<size_t>(n)), recall, capacity);
    p.slash_offsets = select_row(std::span<const float>(slash.data() + row * n, static_cast<size_t>(n)), recall, capacity);
    kept_out << p.vertical_tokens.size();
    for (auto x : p.vertical_tokens) kept_out << ' ' << x;
    kept_out << ' ' << p.slash_offsets.size();
    for (auto x : p.slash_offsets) kept_out << ' ' << x;
    kept_out << '\n';
  }

  // Index per step, forward merged over the steps, backward.
  std::ofstream index_out(dir + "/index.txt");
  auto dump = [&](const char* name, const auto& values) {
    index_out << name;
    for (auto x : values) index_out << ' ' << static_cast<int64_t>(x);
    index_out << '\n';
  };
  std::vector<std::vector<SparseIndex>> index(static_cast<size_t>(w));
  for (int32_t qr = 0; qr < w; ++qr) {
    for (int32_t kr = 0; kr < w; ++kr) {
      index[static_cast<size_t>(qr)].push_back(build_sparse_index(IndexGeometry{RingPosition{layout, qr, kr}, block_q, block_k}, patterns));
      const SparseIndex& ix = index[static_cast<size_t>(qr)].back();
      index_out << "step " << qr << ' ' << kr << '\n';
      dump("tile_offsets", ix.tile_offsets);
      dump("tile_block", ix.tile_block);
      dump("tile_masked", ix.tile_masked);
      dump("column_offsets", ix.column_offsets);
      dump("column_index", ix.column_index);
    }
  }
  AttentionShape step_shape = shape;
  step_shape.q_len = len;
  step_shape.kv_len = len;
  std::vector<float> out_all, lse_all, dq_all;
  std::vector<std::vector<float>> dk(static_cast<size_t>(w), std::vector<float>(static_cast<size_t>(kv_rows * len * dim))),
      dv = dk;
  for (int32_t qr = 0; qr < w; ++qr) {
    std::vector<float> out(static_cast<size_t>(rows * len * dim), 0.0f);
    std::vector<float> lse(static_cast<size_t>(rows * len), -std::numeric_limits<float>::infinity());
    for (int32_t kr = 0; kr < w; ++kr) {
      SparseAttnFwdParams f;
      f.shape = step_shape;
      f.position = RingPosition{layout, qr, kr};
      f.index = host_view(index[static_cast<size_t>(qr)][static_cast<size_t>(kr)]);
      f.softmax_scale = scale;
      f.q = q_local[static_cast<size_t>(qr)].data();
      f.k = k_local[static_cast<size_t>(kr)].data();
      f.v = v_local[static_cast<size_t>(kr)].data();
      f.out = out.data();
      f.lse = lse.data();
      sparse_attn_fwd_ref(f);
    }
    std::vector<float> delta(static_cast<size_t>(rows * len));
    AttnBwdDeltaParams d;
    d.shape = step_shape;
    d.dout = dout_local[static_cast<size_t>(qr)].data();
    d.out = out.data();
    d.delta = delta.data();
    attn_bwd_delta_ref(d);
    std::vector<float> dq(static_cast<size_t>(rows * len * dim), 0.0f);
    for (int32_t kr = 0; kr < w; ++kr) {
      SparseAttnBwdParams b;
      b.shape = step_shape;
      b.position = RingPosition{layout, qr, kr};
      b.index = host_view(index[static_cast<size_t>(qr)][static_cast<size_t>(kr)]);
      b.softmax_scale = scale;
      b.q = q_local[static_cast<size_t>(qr)].data();
      b.k = k_local[static_cast<size_t>(kr)].data();
      b.v = v_local[static_cast<size_t>(kr)].data();
      b.dout = dout_local[static_cast<size_t>(qr)].data();
      b.lse = lse.data();
      b.delta = delta.data();
      b.dq = dq.data();
      b.dk = dk[static_cast<size_t>(kr)].data();
      b.dv = dv[static_cast<size_t>(kr)].data();
      sparse_attn_bwd_ref(b);
    }
    out_all.insert(out_all.end(), out.begin(), out.end());
    lse_all.insert(lse_all.end(), lse.begin(), lse.end());
    dq_all.insert(dq_all.end(), dq.begin(), dq.end());
  }
  std::vector<float> dk_all, dv_all;
  for (int32_t r = 0; r < w; ++r) {
    dk_all.insert(dk_all.end(), dk[static_cast<size_t>(r)].begin(), dk[static_cast<size_t>(r)].end());
    dv_all.insert(dv_all.end(), dv[static_cast<size_t>(r)].begin(), dv[static_cast<size_t>(r)].end());
  }
  write_array(dir + "/out.f32", out_all);
  write_array(dir + "/lse.f32", lse_all);
  write_array(dir + "/dq.f32", dq_all);
  write_array(dir + "/dk.f32", dk_all);
  write_array(dir + "/dv.f32", dv_all);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: vs_oracle_tool DIR\n";
    return 2;
  }
  try {
    return run(argv[1]);
  } catch (const std::exception& error) {
    std::cerr << "vs_oracle_tool: " << error.what() << '\n';
    return 2;
  }
}
