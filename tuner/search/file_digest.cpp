// SHA-256 through OpenSSL's EVP digest interface (libcrypto): one incremental context per hash,
// fed in pieces so a large trace never has to fit in memory.
#include "tuner/search/file_digest.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/input_file.hpp"

namespace sparsering {

namespace {

/// An incremental SHA-256: update() any number of times, then hex() once.
class Sha256 {
 public:
  Sha256() : context_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    if (!context_ || EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr) != 1) fail("initialise");
  }

  void update(const char* data, size_t size_bytes) {
    if (size_bytes > 0 && EVP_DigestUpdate(context_.get(), data, size_bytes) != 1) fail("update");
  }

  std::string hex() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int length = 0;
    if (EVP_DigestFinal_ex(context_.get(), digest.data(), &length) != 1) fail("finish");
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * length);
    for (unsigned int k = 0; k < length; ++k) {
      out.push_back(kDigits[digest[k] >> 4]);
      out.push_back(kDigits[digest[k] & 0xf]);
    }
    return out;
  }

 private:
  [[noreturn]] static void fail(const char* step) {
    throw std::runtime_error(std::string("OpenSSL SHA-256 failed to ") + step);
  }

  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context_;
};

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  Sha256 hash;
  hash.update(bytes.data(), bytes.size());
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
    hash.update(buffer.data(), static_cast<size_t>(want));
    left -= want;
  }
  return "sha256:" + hash.hex();
}

}  // namespace sparsering
