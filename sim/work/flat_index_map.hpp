// A map from 64-bit keys to indices into a store, for the work counter's memo tables: open
// addressing with linear probing in one power-of-two array, so a lookup is a multiply, a shift and
// usually one cache line, and clear() keeps the array for the next head. The counter looks up
// every (rank pair, class pair) of every head; std::unordered_map's node walk was a visible share
// of counting a ring. Tested through tests/sim/flat_index_map_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace sparsering {

class FlatIndexMap {
 public:
  /// The index stored for `key`, inserting `value_if_new` if the key is absent; second is true when
  /// it was inserted.
  std::pair<size_t, bool> try_emplace(int64_t key, size_t value_if_new) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    const size_t mask = slots_.size() - 1;
    for (size_t at = slot_of(key, mask);; at = (at + 1) & mask) {
      Slot& slot = slots_[at];
      if (slot.key == key && slot.used) return {slot.value, false};
      if (!slot.used) {
        slot = Slot{key, value_if_new, true};
        ++size_;
        return {value_if_new, true};
      }
    }
  }

  /// Removes every key; keeps the memory.
  void clear() {
    if (size_ == 0) return;
    for (Slot& slot : slots_) slot.used = false;
    size_ = 0;
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    int64_t key = 0;
    size_t value = 0;
    bool used = false;
  };

  static size_t slot_of(int64_t key, size_t mask) {
    // Fibonacci hashing: the multiply spreads keys that differ in low bits (nearby offsets).
    const uint64_t mixed = static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ULL;
    return static_cast<size_t>(mixed ^ (mixed >> 32)) & mask;
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : 2 * old.size(), Slot{});
    size_ = 0;
    const size_t mask = slots_.size() - 1;
    for (const Slot& slot : old) {
      if (!slot.used) continue;
      size_t at = slot_of(slot.key, mask);
      while (slots_[at].used) at = (at + 1) & mask;
      slots_[at] = slot;
      ++size_;
    }
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace sparsering
