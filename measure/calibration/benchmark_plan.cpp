// The grid spans the work a real ring step sees (a few to tens of thousands of lists, tens to
// thousands of items per head) at a GPU cost of seconds per shape, so a calibration of every
// shape stays well inside a short device lease. Four local lengths give the backward, whose
// launches are filled only from 16K tokens on, three lengths to show how its cost per tile
// depends on the length (docs/calibration.md).
#include "measure/calibration/benchmark_plan.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <optional>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "core/kernel_support.hpp"

namespace sparsering {
namespace {

using Mix = std::pair<int32_t, int32_t>;  // (tiles, chunks) per list

int64_t parse_size(std::string_view text, std::string_view entry, std::string_view option) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  require(error == std::errc() && end == text.data() + text.size() && !text.empty(), option, ": \"", entry,
          "\" is not a shape block_qxblock_kxhead_dim such as 64x64x128");
  return value;
}

}  // namespace

std::vector<KernelShape> default_calibration_shapes() { return {{64, 64, 128}, {128, 128, 128}}; }

std::vector<KernelShape> parse_kernel_shapes(std::string_view text, std::string_view option) {
  std::vector<KernelShape> shapes;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view entry = text.substr(start, comma - start);
    require(entry.size() <= 32, option, ": shape \"", entry.substr(0, 32), "...\" is too long");
    const size_t x1 = entry.find('x');
    const size_t x2 = x1 == std::string_view::npos ? x1 : entry.find('x', x1 + 1);
    require(x2 != std::string_view::npos, option, ": \"", entry, "\" is not a shape block_qxblock_kxhead_dim such as 64x64x128");
    KernelShape s;
    s.block_q = parse_size(entry.substr(0, x1), entry, option);
    s.block_k = parse_size(entry.substr(x1 + 1, x2 - x1 - 1), entry, option);
    s.head_dim = parse_size(entry.substr(x2 + 1), entry, option);
    for (const std::optional<std::string>& reason :
         {block_size_unsupported(s.block_q, str(option, " ", entry, ": block_q")),
          block_size_unsupported(s.block_k, str(option, " ", entry, ": block_k")),
          head_dim_unsupported(s.head_dim, str(option, " ", entry, ": head_dim"))}) {
      require(!reason.has_value(), reason.value_or(""));
    }
    for (const KernelShape& earlier : shapes) require(!(earlier == s), option, ": shape ", entry, " is given twice");
    shapes.push_back(s);
    start = comma + 1;
  }
  return shapes;
}

std::vector<KernelBenchCase> default_kernel_cases(bool quick, const std::vector<KernelShape>& shapes) {
  std::vector<KernelBenchCase> cases;
  for (const KernelShape& shape : shapes) {
    const auto add = [&](int32_t q_heads, int32_t kv_heads, int64_t local, const Mix& mix) {
      if (int64_t{mix.first} + mix.second <= local / shape.block_k) {
        cases.push_back({shape, q_heads, kv_heads, local, mix.first, mix.second});
      }
    };
    if (quick) {
      constexpr std::array<Mix, 5> kQuickMixes{{{1, 0}, {4, 0}, {16, 0}, {0, 2}, {4, 4}}};
      for (const Mix& mix : kQuickMixes) add(32, 4, 16384, mix);
      for (const Mix& mix : kQuickMixes) add(16, 2, 32768, mix);
      add(1, 1, 4096, {16, 0});
      continue;
    }
    constexpr std::array<Mix, 9> kMixes{{{1, 0}, {4, 0}, {16, 0}, {48, 0}, {0, 2}, {4, 1}, {4, 4}, {16, 4}, {8, 16}}};
    constexpr std::array<std::pair<int32_t, int32_t>, 3> kHeads{{{4, 1}, {16, 2}, {32, 4}}};
    for (const auto& [q_heads, kv_heads] : kHeads) {
      for (const int64_t local : {int64_t{4096}, int64_t{16384}, int64_t{32768}, int64_t{65536}}) {
        for (const Mix& mix : kMixes) add(q_heads, kv_heads, local, mix);
      }
    }
    // 16 query heads over 4 K/V heads: twice the backward's key lists of 16/2 at the same lists,
    // tiles and length, so its per-key-list cost is told apart from a cost per token.
    for (const int64_t local : {int64_t{16384}, int64_t{32768}, int64_t{65536}}) {
      for (const Mix& mix : kMixes) add(16, 4, local, mix);
    }
    // Partly filled column items: a real list gathers few columns, which the full chunks above
    // never show; the backward's column pass pays per 64-column item and per column (atomics).
    for (const auto& [q_heads, kv_heads] : std::array<std::pair<int32_t, int32_t>, 2>{{{16, 2}, {32, 4}}}) {
      for (const int64_t local : {int64_t{16384}, int64_t{32768}, int64_t{65536}}) {
        for (const int32_t columns : {16, 40, 100}) {
          const auto chunks = static_cast<int32_t>((columns + shape.block_k - 1) / shape.block_k);
          if (4 + int64_t{chunks} <= local / shape.block_k) {
            cases.push_back({shape, q_heads, kv_heads, local, 4, chunks, columns});
          }
        }
      }
    }
    // Lists that meet a part of the chunk's key blocks, as the steps of large rings: every case
    // above lists every key block, so its key lists are the (K/V head, key block) pairs the
    // backward's key-block pass launches, and a cost per launched pair cannot be told apart from
    // one per key list. Kept where the listed key blocks still make 1024 CTAs of 64 keys (two full
    // waves of two CTAs per SM on GPUs of up to 256 SMs), so the launches are filled.
    for (const auto& [q_heads, kv_heads] : std::array<std::pair<int32_t, int32_t>, 2>{{{32, 4}, {32, 8}}}) {
      for (const int64_t local : {int64_t{16384}, int64_t{32768}, int64_t{65536}}) {
        const int64_t key_blocks = local / shape.block_k;
        for (const int32_t stride : {2, 4, 8}) {
          const int64_t covered = (key_blocks + stride - 1) / stride;
          if (kv_heads * covered * (shape.block_k / 64) < 1024) continue;
          for (const Mix& mix : std::array<Mix, 2>{{{4, 0}, {16, 1}}}) {
            if (int64_t{mix.first} + mix.second > covered) continue;
            KernelBenchCase c{shape, q_heads, kv_heads, local, mix.first, mix.second};
            c.key_block_stride = stride;
            cases.push_back(c);
          }
        }
      }
    }
    for (const int64_t local : {int64_t{4096}, int64_t{16384}}) {
      for (const Mix& mix : std::array<Mix, 3>{{{4, 0}, {16, 0}, {16, 4}}}) add(1, 1, local, mix);
    }
    // Lists as long as dense steps': a dense cell of 16K-64K local tokens lists 128-1024 key
    // blocks per query block, where the mixes above stop at 48 (and sparse steps at a few).
    for (const int64_t local : {int64_t{32768}, int64_t{65536}}) {
      for (const Mix& mix : std::array<Mix, 2>{{{128, 0}, {256, 0}}}) add(16, 2, local, mix);
    }
  }
  return cases;
}

std::vector<int64_t> default_hop_sizes(bool quick, bool dense) {
  const int64_t last = quick ? int64_t{1} << 28 : int64_t{1} << 30;
  std::vector<int64_t> sizes;
  for (int64_t bytes = int64_t{1} << 16; bytes <= last; bytes *= dense ? 2 : 4) sizes.push_back(bytes);
  return sizes;
}

}  // namespace sparsering
