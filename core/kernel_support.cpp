// The kernels' support rules (see kernel_support.hpp). The limits come from how the CUDA kernels
// are built: block loops step over whole 64-token MMA tiles, the kernels are instantiated for
// head dims 64 and 128 only, token positions and CSR column indices are int32, and the query
// tiles of a launch are the grid's y extent.
#include "core/kernel_support.hpp"

#include <utility>

#include "common/error.hpp"

namespace sparsering {

std::optional<std::string> block_size_unsupported(int64_t block_tokens, std::string_view name) {
  if (is_supported_block_size(block_tokens)) return std::nullopt;
  return str(name, " must be a positive multiple of ", kKernelTileTokens, ", got ", block_tokens);
}

bool is_supported_block_size(int64_t block_tokens) {
  return block_tokens >= kKernelTileTokens && block_tokens % kKernelTileTokens == 0;
}

std::optional<std::string> head_dim_unsupported(int64_t head_dim, std::string_view name) {
  if (head_dim == 64 || head_dim == 128) return std::nullopt;
  return str(name, " must be 64 or 128 for the CUDA kernels, got ", head_dim);
}

std::optional<std::string> head_ratio_unsupported(int64_t q_heads, int64_t kv_heads, std::string_view q_name,
                                                  std::string_view kv_name) {
  if (q_heads < 1) return str(q_name, " must be >= 1, got ", q_heads);
  if (kv_heads >= 1 && q_heads % kv_heads == 0) return std::nullopt;
  return str(kv_name, " must divide ", q_name, " (", q_heads, "), got ", kv_heads);
}

std::optional<std::string> token_count_unsupported(int64_t tokens, std::string_view name) {
  if (tokens < kKernelMaxTokensExclusive) return std::nullopt;
  return str(name, " must be < 2^31 (the kernels hold token positions and column indices in int32), got ", tokens);
}

std::optional<std::string> query_tiles_unsupported(int64_t q_len_tokens, int64_t block_q_tokens,
                                                   std::string_view name) {
  // Whole query blocks, each of block_q / 64 tiles: a partial last block still launches all its tiles.
  const int64_t q_blocks = (q_len_tokens + block_q_tokens - 1) / block_q_tokens;
  if (q_blocks * (block_q_tokens / kKernelTileTokens) <= kKernelMaxQueryTiles) return std::nullopt;
  return str(name, " ", q_len_tokens, " in blocks of ", block_q_tokens, " needs more than ", kKernelMaxQueryTiles, " ",
             kKernelTileTokens, "-row query tiles");
}

std::optional<std::string> kernel_problem_unsupported(const KernelProblem& problem) {
  if (auto why = block_size_unsupported(problem.block_q, "block_q")) return why;
  if (auto why = block_size_unsupported(problem.block_k, "block_k")) return why;
  if (auto why = head_dim_unsupported(problem.head_dim, "head_dim")) return why;
  if (auto why = head_ratio_unsupported(problem.q_heads, problem.kv_heads, "q_heads", "kv_heads")) return why;
  const std::pair<int64_t, const char*> counts[] = {{problem.q_len_tokens, "q_len_tokens"},
                                                    {problem.kv_len_tokens, "kv_len_tokens"},
                                                    {problem.seq_len_tokens, "seq_len_tokens"}};
  for (const auto& [tokens, name] : counts) {
    if (tokens < 0) return str(name, " must be >= 0, got ", tokens);
    if (auto why = token_count_unsupported(tokens, name)) return why;
  }
  return query_tiles_unsupported(problem.q_len_tokens, problem.block_q, "q_len_tokens");
}

}  // namespace sparsering
