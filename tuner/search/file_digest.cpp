#include "tuner/search/file_digest.hpp"

#include <array>
#include <cstdint>
#include <algorithm>
#include <limits>
#include <vector>

#include "common/error.hpp"
#include "common/input_file.hpp"

namespace sparsering {

namespace {

__extension__ typedef unsigned __int128 Wide;

/// floor(root-th root of `value`), by bisection on integers.
uint64_t integer_root(Wide value, int root) {
  uint64_t lo = 0;
  uint64_t hi = uint64_t{1} << (root == 2 ? 40 : 36);
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo + 1) / 2;
    Wide power = 1;
    for (int k = 0; k < root; ++k) power *= mid;
    if (power <= value) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

/// The standard's constants: the first 32 fraction bits of the square roots (initial hash) and
/// cube roots (round constants) of the first primes, computed exactly with integer roots.
struct Constants {
  std::array<uint32_t, 8> initial{};
  std::array<uint32_t, 64> rounds{};
  Constants() {
    std::vector<uint64_t> primes;
    for (uint64_t n = 2; primes.size() < 64; ++n) {
      bool prime = true;
      for (const uint64_t p : primes) prime = prime && n % p != 0;
      if (prime) primes.push_back(n);
    }
    for (size_t i = 0; i < 8; ++i) {
      initial[i] = static_cast<uint32_t>(integer_root(static_cast<Wide>(primes[i]) << 64, 2));
    }
    for (size_t i = 0; i < 64; ++i) {
      rounds[i] = static_cast<uint32_t>(integer_root(static_cast<Wide>(primes[i]) << 96, 3));
    }
  }
};

const Constants& constants() {
  static const Constants c;
  return c;
}

uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

class Sha256 {
 public:
  Sha256() : state_(constants().initial) {}

  void update(const unsigned char* data, size_t size) {
    length_ += size;
    size_t i = 0;
    while (i < size) {
      if (fill_ == 0 && size - i >= 64) {  // whole blocks straight from the input
        compress(data + i);
        i += 64;
        continue;
      }
      block_[fill_++] = data[i++];
      if (fill_ == 64) {
        compress(block_.data());
        fill_ = 0;
      }
    }
  }

  std::string hex() {
    const uint64_t bits = length_ * 8;
    const unsigned char one = 0x80;
    update(&one, 1);
    const unsigned char zero = 0;
    while (fill_ != 56) update(&zero, 1);
    for (int k = 7; k >= 0; --k) block_[fill_++] = static_cast<unsigned char>(bits >> (8 * k));
    compress(block_.data());
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (const uint32_t word : state_) {
      for (int k = 28; k >= 0; k -= 4) out += digits[(word >> k) & 0xF];
    }
    return out;
  }

 private:
  void compress(const unsigned char* block) {
    const std::array<uint32_t, 64>& k = constants().rounds;
    std::array<uint32_t, 64> w{};
    for (size_t t = 0; t < 16; ++t) {
      w[t] = (uint32_t{block[4 * t]} << 24) | (uint32_t{block[4 * t + 1]} << 16) | (uint32_t{block[4 * t + 2]} << 8) |
             uint32_t{block[4 * t + 3]};
    }
    for (size_t t = 16; t < 64; ++t) {
      const uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      const uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
    uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
    for (size_t t = 0; t < 64; ++t) {
      const uint32_t big1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      const uint32_t choose = (e & f) ^ (~e & g);
      const uint32_t t1 = h + big1 + choose + k[t] + w[t];
      const uint32_t big0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      const uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
      const uint32_t t2 = big0 + majority;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state_[0] += a;
    state_[1] += b;
    state_[2] += c;
    state_[3] += d;
    state_[4] += e;
    state_[5] += f;
    state_[6] += g;
    state_[7] += h;
  }

  std::array<uint32_t, 8> state_;
  std::array<unsigned char, 64> block_{};
  size_t fill_ = 0;
  uint64_t length_ = 0;
};

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  Sha256 hash;
  hash.update(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return hash.hex();
}

std::string file_digest(const std::filesystem::path& path) {
  // Through InputFile so a FIFO or device named as an input cannot block or feed the hash forever.
  InputFile in(path, std::numeric_limits<int64_t>::max());
  Sha256 hash;
  std::vector<char> buffer(1 << 20);
  for (int64_t left = in.size_bytes(); left > 0;) {
    const int64_t want = std::min<int64_t>(left, static_cast<int64_t>(buffer.size()));
    in.read_exactly(buffer.data(), want);
    hash.update(reinterpret_cast<const unsigned char*>(buffer.data()), static_cast<size_t>(want));
    left -= want;
  }
  return "sha256:" + hash.hex();
}

}  // namespace sparsering
