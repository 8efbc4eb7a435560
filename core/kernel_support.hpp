// What problems the CUDA sparse attention kernels can run (the can_implement step of cutlass),
// as pure host functions that need no GPU: block sizes, head dim, the GQA ratio, token counts
// and the number of query tiles of one launch. The kernels' launch checks
// (kernels/cuda/attention_checks.hpp), plan parsing (sim/config/plan_config.hpp) and the tuner's
// search space (tuner/search/search_space.hpp) all ask these functions, so a plan or a tuned
// candidate is never one the kernels reject at launch. Pointer, alignment and index-consistency
// checks stay with the launchers. Each function returns nullopt when the kernels support the
// value and otherwise the reason, a sentence that starts with the `name` it is given (a key path
// or field name) and ends with the value, e.g. "sparse.block_q must be a positive multiple of 64,
// got 32". Tested in tests/core/kernel_support_test.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sparsering {

/// Query and key blocks are whole 64-token tiles of the kernels' warp MMA loops (tokens).
inline constexpr int64_t kKernelTileTokens = 64;
/// Token positions and column indices are int32 in the kernels: token counts stay below this.
inline constexpr int64_t kKernelMaxTokensExclusive = int64_t{1} << 31;
/// Most 64-row query tiles one launch covers (the CUDA grid's y extent).
inline constexpr int64_t kKernelMaxQueryTiles = 65535;

/// Why the kernels cannot use `block_tokens` as block_q or block_k (it must be a positive
/// multiple of kKernelTileTokens), or nullopt when they can.
std::optional<std::string> block_size_unsupported(int64_t block_tokens, std::string_view name);

/// True when the kernels support `block_tokens` as block_q and block_k.
bool is_supported_block_size(int64_t block_tokens);

/// Why the kernels cannot run head dimension `head_dim` (they are built for 64 and 128), or nullopt.
std::optional<std::string> head_dim_unsupported(int64_t head_dim, std::string_view name);

/// Why the kernels cannot run `q_heads` query heads over `kv_heads` KV heads (both must be >= 1
/// and kv_heads must divide q_heads: grouped-query attention with a whole group size), or nullopt.
/// `q_name` and `kv_name` name the two values in the reason.
std::optional<std::string> head_ratio_unsupported(int64_t q_heads, int64_t kv_heads, std::string_view q_name,
                                                  std::string_view kv_name);

/// Why the kernels cannot index `tokens` tokens (a sequence length or a K/V chunk length; it must
/// be below kKernelMaxTokensExclusive), or nullopt. Precondition: tokens >= 0.
std::optional<std::string> token_count_unsupported(int64_t tokens, std::string_view name);

/// Why one launch cannot cover `q_len_tokens` queries in blocks of `block_q_tokens` (more than
/// kKernelMaxQueryTiles 64-row tiles), or nullopt. Preconditions: q_len_tokens >= 0 and
/// block_q_tokens is a supported block size.
std::optional<std::string> query_tiles_unsupported(int64_t q_len_tokens, int64_t block_q_tokens,
                                                   std::string_view name);

/// The shape of one kernel launch, as far as support depends on it.
struct KernelProblem {
  int64_t block_q = 64;        ///< query block (tokens)
  int64_t block_k = 64;        ///< key tile (tokens)
  int64_t head_dim = 128;      ///< D
  int64_t q_heads = 1;         ///< Hq
  int64_t kv_heads = 1;        ///< Hkv
  int64_t q_len_tokens = 0;    ///< local queries of the launch
  int64_t kv_len_tokens = 0;   ///< keys of the K/V chunk the launch reads
  int64_t seq_len_tokens = 0;  ///< the whole sequence (global positions)
};

/// Every rule above on one problem, in the order block_q, block_k, head_dim, heads, token counts,
/// query tiles; returns the first reason (naming the field: "block_q", "head_dim", ...) or
/// nullopt when the kernels can run it. Negative token counts are unsupported too.
std::optional<std::string> kernel_problem_unsupported(const KernelProblem& problem);

}  // namespace sparsering
