#include "core/token_layout.hpp"

#include "common/error.hpp"

namespace sparsering {

TokenLayout make_token_layout(LayoutKind kind, int64_t seq_len_tokens, int32_t ranks, int64_t granularity_tokens) {
  require(seq_len_tokens > 0, "sequence length must be > 0 tokens, got ", seq_len_tokens);
  require(ranks >= 1, "ring size must be >= 1 rank, got ", ranks);
  TokenLayout layout{kind, seq_len_tokens, ranks, 0};
  switch (kind) {
    case LayoutKind::contiguous:
      require(seq_len_tokens % ranks == 0, "contiguous layout needs the sequence length (", seq_len_tokens,
              ") divisible by the ring size (", ranks, ")");
      break;
    case LayoutKind::zigzag:
      require(seq_len_tokens % (2 * int64_t{ranks}) == 0, "zigzag layout needs the sequence length (",
              seq_len_tokens, ") divisible by 2 x ring size (", 2 * int64_t{ranks}, ")");
      break;
    case LayoutKind::striped:
      require(granularity_tokens >= 1, "striped layout needs granularity_tokens >= 1, got ", granularity_tokens);
      // N % G == 0 and (N / G) % W == 0 is N % (G x W) == 0 without overflowing G x W.
      require(seq_len_tokens % granularity_tokens == 0 && (seq_len_tokens / granularity_tokens) % ranks == 0,
              "striped layout needs the sequence length (", seq_len_tokens,
              ") divisible by granularity x ring size (", granularity_tokens, " x ", ranks, ")");
      layout.granularity_tokens_ = granularity_tokens;
      break;
    default:
      throw InputError(str("unknown layout kind ", static_cast<int>(kind)));
  }
  return layout;
}

std::vector<int64_t> layout_permutation(const TokenLayout& layout) {
  std::vector<int64_t> permutation(static_cast<size_t>(layout.seq_len_tokens()));
  const int64_t local = layout.local_len();
  for (int32_t r = 0; r < layout.ranks(); ++r) {
    for (int64_t i = 0; i < local; ++i) permutation[static_cast<size_t>(r * local + i)] = layout.global_token(r, i);
  }
  return permutation;
}

std::string_view to_string(LayoutKind kind) {
  switch (kind) {
    case LayoutKind::contiguous: return "contiguous";
    case LayoutKind::zigzag: return "zigzag";
    case LayoutKind::striped: return "striped";
  }
  return "unknown";
}

LayoutKind parse_layout_kind(std::string_view name) {
  if (name == "contiguous") return LayoutKind::contiguous;
  if (name == "zigzag") return LayoutKind::zigzag;
  if (name == "striped") return LayoutKind::striped;
  throw InputError(str("unknown token layout '", name, "' (expected contiguous, zigzag or striped)"));
}

}  // namespace sparsering
