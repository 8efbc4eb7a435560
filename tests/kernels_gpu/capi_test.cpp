// Tests of the C API of libsparsering_kernels.so (kernels/cuda/capi/) through the shared library
// itself: bad arguments come back as SR_INPUT_ERROR with a message naming the field, before any
// CUDA call (so these run without a GPU too), and the last error is per call. The numerical
// path through the library is checked on the GPU by kernels/bench/check_capi.py.
#include <gtest/gtest.h>

#include <string>

#include "sparsering_kernels.h"

namespace {

// 16-byte aligned dummy addresses: the checks never dereference them.
void* fake(uintptr_t n) { return reinterpret_cast<void*>(n * 256); }

sr_attention_problem valid_problem() {
  sr_attention_problem p{};
  p.batch = 1;
  p.q_heads = 2;
  p.kv_heads = 1;
  p.head_dim = 128;
  p.q_len = 64;
  p.kv_len = 64;
  p.layout_kind = SR_LAYOUT_CONTIGUOUS;
  p.ring_ranks = 1;
  p.seq_len_tokens = 64;
  p.softmax_scale = 0.125f;
  p.block_q = 64;
  p.block_k = 64;
  p.q_blocks = 1;
  p.tile_offsets = static_cast<const int32_t*>(fake(10));
  p.tile_block = static_cast<const int32_t*>(fake(11));
  p.tile_masked = static_cast<const uint8_t*>(fake(12));
  p.column_offsets = static_cast<const int32_t*>(fake(13));
  p.column_index = static_cast<const int32_t*>(fake(14));
  return p;
}

TEST(KernelsCApi, RejectsBadProblemsWithNamedFields) {
  const struct Case {
    const char* field;
    void (*mutate)(sr_attention_problem&);
  } cases[] = {
      {"head_dim", [](sr_attention_problem& p) { p.head_dim = 96; }},
      {"kv_heads", [](sr_attention_problem& p) { p.kv_heads = 3; }},
      {"block_k", [](sr_attention_problem& p) { p.block_k = 48; }},
      {"q_blocks", [](sr_attention_problem& p) { p.q_blocks = 3; }},
      {"layout_kind", [](sr_attention_problem& p) { p.layout_kind = 7; }},
      {"softmax_scale", [](sr_attention_problem& p) { p.softmax_scale = -1.0f; }},
      {"ring size", [](sr_attention_problem& p) { p.ring_ranks = 0; }},
      {"max_tiles", [](sr_attention_problem& p) { p.max_tiles = -1; }},
  };
  for (const Case& c : cases) {
    sr_attention_problem p = valid_problem();
    c.mutate(p);
    const int code = sr_sparse_attn_fwd(&p, fake(1), fake(2), fake(3), static_cast<float*>(fake(4)),
                                        static_cast<float*>(fake(5)), nullptr);
    EXPECT_EQ(code, SR_INPUT_ERROR) << c.field;
    EXPECT_NE(std::string(sr_last_error()).find(c.field), std::string::npos) << c.field << ": " << sr_last_error();
  }
  EXPECT_EQ(sr_sparse_attn_fwd(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr), SR_INPUT_ERROR);
  sr_attention_problem p = valid_problem();
  EXPECT_EQ(sr_sparse_attn_bwd(&p, fake(1), fake(2), fake(3), nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                               nullptr),
            SR_INPUT_ERROR);
  EXPECT_NE(std::string(sr_last_error()).find("must not be null"), std::string::npos) << sr_last_error();
  EXPECT_EQ(sr_attn_bwd_delta(4, 80, fake(1), nullptr, nullptr, nullptr), SR_INPUT_ERROR);
  EXPECT_NE(std::string(sr_last_error()).find("head_dim"), std::string::npos) << sr_last_error();
  EXPECT_EQ(sr_attn_bwd_delta(-1, 128, fake(1), nullptr, nullptr, nullptr), SR_INPUT_ERROR);
}

// The preallocated index's calls refuse bad arguments before touching the GPU, naming them.
TEST(KernelsCApi, IndexIntoRejectsBadArguments) {
  sr_index* index = reinterpret_cast<sr_index*>(fake(9));
  auto expect_refused = [](int code, const char* named) {
    EXPECT_EQ(code, SR_INPUT_ERROR) << named;
    EXPECT_NE(std::string(sr_last_error()).find(named), std::string::npos) << named << ": " << sr_last_error();
  };
  expect_refused(sr_index_allocate(4, 16, SR_LAYOUT_CONTIGUOUS, 1, 1024, 0, 0, 0, 64, 64, nullptr), "must not be null");
  expect_refused(sr_index_allocate(4, 0, SR_LAYOUT_CONTIGUOUS, 1, 1024, 0, 0, 0, 64, 64, &index), "capacity");
  EXPECT_EQ(index, nullptr) << "a refused allocation leaves no index";
  expect_refused(sr_index_allocate(4, 16, 7, 1, 1024, 0, 0, 0, 64, 64, &index), "layout_kind");
  expect_refused(sr_index_allocate(4, 16, SR_LAYOUT_CONTIGUOUS, 0, 1024, 0, 0, 0, 64, 64, &index), "ring size");
  expect_refused(sr_index_allocate(4, 16, SR_LAYOUT_CONTIGUOUS, 2, 1024, 0, 2, 0, 64, 64, &index), "position ranks");
  expect_refused(sr_build_index_into(4, 16, nullptr, nullptr, nullptr, nullptr, SR_LAYOUT_CONTIGUOUS, 1, 1024, 0, 0, 0,
                                     nullptr, nullptr),
                 "must not be null");
  expect_refused(sr_index_read_counts(nullptr, nullptr), "must not be null");
}

TEST(KernelsCApi, ReportsVersion) { EXPECT_FALSE(std::string(sr_version()).empty()); }

}  // namespace
