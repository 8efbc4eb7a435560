// The key-side work items an attention CTA walks for one (row, query block) list of the sparse
// index: first every key tile of the tile list (split into 64-key sub-tiles when block_k > 64),
// then the vertical columns, gathered 64 at a time. One item = up to 64 keys loaded into one
// shared tile. Also the shared-memory item slots that describe an item ahead of its loads.
// Shared by the forward and backward kernels; tested through them in tests/kernels_gpu/.
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

/// An item's 64 key slots described in shared memory ahead of its loads (the forward kernel keeps
/// three in a ring: item t computes, t+1 loads, t+2 is described), so the loop that issues an
/// item's cp.async copies and applies its mask reads shared memory instead of waiting on the index
/// in global memory. 528 bytes, a multiple of 16.
struct ItemSlot {
  int32_t row[kTileRows];     ///< local key position, -1 for an empty slot (zero-filled)
  int32_t global[kTileRows];  ///< global position, kNoKeyGlobal for an empty slot
  int32_t masked;             ///< nonzero when the per-pair causal / bounds mask applies
  int32_t padding[3];
};

/// What one thread reads from the index in global memory for slot `r` of item `t`: issued early,
/// consumed by finish_item_slot later, so the load's latency overlaps other work.
struct ItemSlotFetch {
  int32_t value = -1;  ///< tile item: its key block; column item: the column (-1 past the chunk)
  int32_t masked = 1;  ///< tile item: the index's masked flag; column item: 1
};

/// Reads the index entries behind slot `r` of item `t` of `items` (t < items.size(), r < 64).
__device__ __forceinline__ ItemSlotFetch fetch_item_slot(const SparseIndexView& index, const KeyItemList& items, int t,
                                                         int r) {
  ItemSlotFetch fetch;
  if (t < items.tile_items) {
    const int tile = items.tile_begin + t / (index.block_k / kTileRows);
    fetch.value = index.tile_block[tile];
    fetch.masked = index.tile_masked[tile];
  } else {
    const int column = items.column_begin + (t - items.tile_items) * kTileRows + r;
    if (column < items.column_end) fetch.value = index.column_index[column];
  }
  return fetch;
}

/// Completes slot `r` of item `t` from its fetch, with the semantics of key_item: writes the
/// local key position (`write_global` false) or the global position and, for r == 0, the masked
/// flag (`write_global` true). Two threads per slot split the work; one thread may do both.
__device__ __forceinline__ void finish_item_slot(ItemSlot& slot, const ItemSlotFetch& fetch,
                                                 const SparseIndexView& index, const KeyItemList& items, int t,
                                                 int r, int64_t kv_len, const RingPosition& position,
                                                 bool write_global) {
  int64_t key = fetch.value;
  bool valid = fetch.value >= 0;
  bool masked = true;
  if (t < items.tile_items) {
    const int64_t key0 = int64_t{fetch.value} * index.block_k + int64_t{t % (index.block_k / kTileRows)} * kTileRows;
    const int64_t left = kv_len - key0;
    const int count = left <= 0 ? 0 : (left < kTileRows ? static_cast<int>(left) : kTileRows);
    key = key0 + r;
    valid = r < count;
    masked = fetch.masked != 0 || count < kTileRows;
  }
  if (!write_global) {
    slot.row[r] = valid ? static_cast<int32_t>(key) : -1;
  } else {
    slot.global[r] =
        valid ? static_cast<int32_t>(position.layout.global_token(position.kv_rank, key)) : kNoKeyGlobal;
    if (r == 0) slot.masked = masked ? 1 : 0;
  }
}

/// Issues the cp.async copies of a described item's rows from `base` ((Skv, D) of one K or V
/// head) into a padded shared tile; empty slots are zero-filled.
template <int kHeadDim, int kThreads>
__device__ __forceinline__ void load_slot_async(uint32_t tile_smem, const uint16_t* base, const ItemSlot& slot) {
  load_tile_async<kHeadDim, kThreads>(tile_smem, base, [&](int r) -> const uint16_t* {
    const int32_t row = slot.row[r];
    return row >= 0 ? base + int64_t{row} * kHeadDim : nullptr;
  });
}

}  // namespace sparsering::cuda
