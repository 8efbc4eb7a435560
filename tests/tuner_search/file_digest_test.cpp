// SHA-256 (tuner/search/file_digest.hpp) against the FIPS 180-4 example vectors, across block
// boundaries and for files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.hpp"
#include "tuner/search/file_digest.hpp"

namespace sparsering {
namespace {

TEST(FileDigest, StandardVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(FileDigest, FilesHashTheirBytes) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "sparsering_digest_test.bin";
  std::string bytes;
  for (int i = 0; i < 3'000'000; ++i) bytes.push_back(static_cast<char>(i * 7 + (i >> 9)));
  {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  EXPECT_EQ(file_digest(path), "sha256:" + sha256_hex(bytes));
  std::filesystem::remove(path);
  EXPECT_THROW(file_digest(path), InputError);
}

}  // namespace
}  // namespace sparsering
