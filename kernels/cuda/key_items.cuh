// The key-side work items an attention CTA walks for one (row, query block) list of the sparse
// index: first every key tile of the tile list (split into 64-key sub-tiles when block_k > 64),
// then the vertical columns, gathered 64 at a time. One item = up to 64 keys loaded into one
// shared tile. Shared by the forward and backward kernels; tested through them in
// tests/kernels_gpu/.
#pragma once

#include <cstdint>

#include "kernels/attention_params.hpp"
#include "kernels/cuda/warp_mma.cuh"

namespace sparsering::cuda {

/// Global position used for a key slot that holds no key: later than every query, so the causal
/// comparison masks it. Global positions fit int32 (check_sparse_attention_problem: N < 2^31).
inline constexpr int32_t kNoKeyGlobal = INT32_MAX;

/// One item: keys key0 .. key0+count-1 (contiguous) or columns[0 .. count-1] (gathered).
struct KeyItem {
  int64_t key0 = 0;
  const int32_t* columns = nullptr;  ///< non-null for a gathered column chunk
  int count = 0;                     ///< valid keys in the item, 0..64
  bool masked = false;               ///< the per-pair causal / bounds mask must be applied
};

/// The key items of one index list: [tile_begin, tile_end) tiles and [column_begin, column_end)
/// columns of the index view.
struct KeyItemList {
  int tile_begin = 0;
  int tile_items = 0;  ///< tiles x (block_k / 64)
  int column_begin = 0;
  int column_end = 0;
  int column_items = 0;  ///< ceil(columns / 64)

  __device__ int size() const { return tile_items + column_items; }
};

/// The items of list `list` (row * q_blocks + query block).
__device__ __forceinline__ KeyItemList key_item_list(const SparseIndexView& index, int64_t list) {
  KeyItemList items;
  items.tile_begin = index.tile_offsets[list];
  items.tile_items = (index.tile_offsets[list + 1] - items.tile_begin) * (index.block_k / kTileRows);
  items.column_begin = index.column_offsets[list];
  items.column_end = index.column_offsets[list + 1];
  items.column_items = (items.column_end - items.column_begin + kTileRows - 1) / kTileRows;
  return items;
}

/// Item `t` of `items`. Tile sub-tiles need the mask when the index flags the tile or the keys
/// run past kv_len; column chunks always apply it (the index only promises some query sees them).
__device__ __forceinline__ KeyItem key_item(const SparseIndexView& index, const KeyItemList& items, int t,
                                            int64_t kv_len) {
  KeyItem item;
  if (t < items.tile_items) {
    const int subs = index.block_k / kTileRows;
    const int tile = items.tile_begin + t / subs;
    item.key0 = int64_t{index.tile_block[tile]} * index.block_k + int64_t{t % subs} * kTileRows;
    const int64_t left = kv_len - item.key0;
    item.count = left <= 0 ? 0 : (left < kTileRows ? static_cast<int>(left) : kTileRows);
    item.masked = index.tile_masked[tile] != 0 || item.count < kTileRows;
  } else {
    const int start = items.column_begin + (t - items.tile_items) * kTileRows;
    const int left = items.column_end - start;
    item.columns = index.column_index + start;
    item.count = left < kTileRows ? left : kTileRows;
    item.masked = true;
  }
  return item;
}

/// Local key position of slot `r` of an item (r < item.count).
__device__ __forceinline__ int64_t item_key(const KeyItem& item, int r) {
  return item.columns != nullptr ? int64_t{item.columns[r]} : item.key0 + r;
}

/// Issues the cp.async copies of an item's rows from `base` ((Skv, D) of one K or V head) into a
/// padded shared tile; slots past item.count are zero-filled (so 0 * garbage never makes NaN).
template <int kHeadDim, int kThreads>
__device__ __forceinline__ void load_item_async(uint32_t tile_smem, const uint16_t* base, const KeyItem& item) {
  load_tile_async<kHeadDim, kThreads>(tile_smem, base, [&](int r) -> const uint16_t* {
    return r < item.count ? base + item_key(item, r) * kHeadDim : nullptr;
  });
}

/// Writes the global positions of an item's 64 key slots (kNoKeyGlobal past item.count) into
/// shared memory; threads 0..63 each write one slot.
__device__ __forceinline__ void store_item_globals(int32_t* key_global, const KeyItem& item,
                                                   const RingPosition& position) {
  const int r = static_cast<int>(threadIdx.x);
  if (r < kTileRows) {
    key_global[r] = r < item.count
                        ? static_cast<int32_t>(position.layout.global_token(position.kv_rank, item_key(item, r)))
                        : kNoKeyGlobal;
  }
}

}  // namespace sparsering::cuda
