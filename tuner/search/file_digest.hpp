// SHA-256 (FIPS 180-4, computed by OpenSSL's libcrypto) of bytes and files, for the `input_hashes` a
// tuned plan records next to its prediction (model, cluster, trace), so a later reader can tell whether
// the inputs changed. Tested against the FIPS 180-4 example vectors in tests/tuner_search/file_digest_test.cpp.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace sparsering {

/// Lower-case hex SHA-256 of `bytes`.
std::string sha256_hex(std::string_view bytes);

/// "sha256:<hex>" of a file's contents, read in pieces. Throws InputError naming the path when it
/// cannot be read.
std::string file_digest(const std::filesystem::path& path);

}  // namespace sparsering
