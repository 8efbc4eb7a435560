// Token layouts for context parallelism: which ring rank owns which token of the sequence, and in
// which local order. The single definition used by the simulator's work counting, the kernels'
// index builder and shuffle, and the exporters. Functions marked SPARSERING_HD run in kernels too.
// Tested in tests/core/token_layout_test.cpp (bijection, closed forms, striped balance identity,
// rejected shapes).
//
// A TokenLayout cannot hold an invalid shape: the only way to build one other than the trivial
// default is make_token_layout, which checks every rule; the fields are read through accessors.
// The stripe granularity is in tokens everywhere (plans, the tuner's candidates, the kernels).
//
// Ranks here are ring-local: position 0..W-1 in the context-parallel ring, which is the order the
// layout deals chunks in. Mapping them to global ranks is the plan's ring order, never done here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/host_device.hpp"

namespace sparsering {

enum class LayoutKind : int32_t {
  contiguous = 0,  ///< rank r holds tokens [r*N/W, (r+1)*N/W)
  zigzag = 1,      ///< 2W chunks; rank r holds chunks r and 2W-1-r (balanced for dense causal)
  striped = 2,     ///< stripes of G tokens dealt round robin: stripe g goes to rank g mod W
};

/// Where a global token lives: its ring rank and its position in that rank's local sequence.
struct TokenOwner {
  int32_t ring_rank;
  int64_t local_index;
};

class TokenLayout {
 public:
  /// The trivial layout: one token on one rank (contiguous). Valid; a placeholder until assigned.
  TokenLayout() = default;

  SPARSERING_HD LayoutKind kind() const { return kind_; }
  /// N: tokens of the whole sequence (> 0).
  SPARSERING_HD int64_t seq_len_tokens() const { return seq_len_tokens_; }
  /// W: ring size (context-parallel degree, >= 1).
  SPARSERING_HD int32_t ranks() const { return ranks_; }
  /// G: stripe size in tokens (striped only, else 0).
  SPARSERING_HD int64_t granularity_tokens() const { return granularity_tokens_; }

  /// Tokens each rank holds (N/W; every layout requires W to divide N).
  SPARSERING_HD int64_t local_len() const { return seq_len_tokens_ / ranks_; }

  /// Global position of local token `local_index` of `ring_rank`.
  SPARSERING_HD int64_t global_token(int32_t ring_rank, int64_t local_index) const {
    switch (kind_) {
      case LayoutKind::zigzag: {
        const int64_t half = seq_len_tokens_ / (2 * int64_t{ranks_});
        return local_index < half ? ring_rank * half + local_index
                                  : (2 * int64_t{ranks_} - 1 - ring_rank) * half + (local_index - half);
      }
      case LayoutKind::striped: {
        const int64_t stripe = local_index / granularity_tokens_;
        return (stripe * ranks_ + ring_rank) * granularity_tokens_ + local_index % granularity_tokens_;
      }
      case LayoutKind::contiguous:
      default:
        return ring_rank * local_len() + local_index;
    }
  }

  /// Inverse of global_token.
  SPARSERING_HD TokenOwner owner(int64_t global) const {
    switch (kind_) {
      case LayoutKind::zigzag: {
        const int64_t half = seq_len_tokens_ / (2 * int64_t{ranks_});
        const int64_t chunk = global / half;
        return chunk < ranks_ ? TokenOwner{static_cast<int32_t>(chunk), global % half}
                              : TokenOwner{static_cast<int32_t>(2 * ranks_ - 1 - chunk), half + global % half};
      }
      case LayoutKind::striped: {
        const int64_t stripe = global / granularity_tokens_;
        return TokenOwner{static_cast<int32_t>(stripe % ranks_),
                          (stripe / ranks_) * granularity_tokens_ + global % granularity_tokens_};
      }
      case LayoutKind::contiguous:
      default:
        return TokenOwner{static_cast<int32_t>(global / local_len()), global % local_len()};
    }
  }

  friend bool operator==(const TokenLayout&, const TokenLayout&) = default;

 private:
  friend TokenLayout make_token_layout(LayoutKind, int64_t, int32_t, int64_t);
  TokenLayout(LayoutKind kind, int64_t seq_len_tokens, int32_t ranks, int64_t granularity_tokens)
      : kind_(kind), seq_len_tokens_(seq_len_tokens), ranks_(ranks), granularity_tokens_(granularity_tokens) {}

  LayoutKind kind_ = LayoutKind::contiguous;
  int64_t seq_len_tokens_ = 1;
  int32_t ranks_ = 1;
  int64_t granularity_tokens_ = 0;
};

/// The one way to build a layout: checks N > 0, W >= 1, and N divisible by W (contiguous), 2W
/// (zigzag) or G*W (striped, G >= 1; G is ignored for the other kinds and stored as 0). Throws
/// InputError naming the violated rule and the values.
TokenLayout make_token_layout(LayoutKind kind, int64_t seq_len_tokens, int32_t ranks, int64_t granularity_tokens = 0);

/// The ring rank whose K/V chunk `ring_rank` holds at step `step` of a flat ring in which K/V moves
/// from rank r to rank r+1 each step: (ring_rank - step) mod W.
SPARSERING_HD inline int32_t kv_source_rank(int32_t ring_rank, int32_t step, int32_t ranks) {
  return ((ring_rank - step) % ranks + ranks) % ranks;
}

/// The permutation the data loader applies: entry [r * N/W + i] is the global token that rank r
/// holds at local position i.
std::vector<int64_t> layout_permutation(const TokenLayout& layout);

std::string_view to_string(LayoutKind kind);
/// Parses "contiguous", "zigzag" or "striped"; throws InputError listing the choices otherwise.
LayoutKind parse_layout_kind(std::string_view name);

}  // namespace sparsering
