#include "tuner/export/npy_file.hpp"

#include <regex>

#include "common/error.hpp"

namespace sparsering {
namespace {

constexpr std::string_view kMagic{"\x93NUMPY", 6};
constexpr size_t kPreambleBytes = 10;  // magic (6), version (2), header length (2)

void append_le64(std::string& out, int64_t value) {
  auto bits = static_cast<uint64_t>(value);
  for (int i = 0; i < 8; ++i) {
    out.push_back(static_cast<char>(bits & 0xffU));
    bits >>= 8U;
  }
}

int64_t read_le64(std::string_view bytes, size_t offset) {
  uint64_t bits = 0;
  for (size_t i = 0; i < 8; ++i) bits |= uint64_t{static_cast<unsigned char>(bytes[offset + i])} << (8U * i);
  return static_cast<int64_t>(bits);
}

}  // namespace

std::string write_npy_int64(const Int64Matrix& matrix) {
  require(matrix.rows >= 0 && matrix.cols >= 0 &&
              static_cast<int64_t>(matrix.values.size()) == matrix.rows * matrix.cols,
          "npy matrix of ", matrix.rows, " x ", matrix.cols, " has ", matrix.values.size(), " values");
  std::string header =
      str("{'descr': '<i8', 'fortran_order': False, 'shape': (", matrix.rows, ", ", matrix.cols, "), }");
  // Pad with spaces and end with a newline so that the data starts at a multiple of 64 bytes.
  const size_t unpadded = kPreambleBytes + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out(kMagic);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(header.size() & 0xffU));
  out.push_back(static_cast<char>((header.size() >> 8U) & 0xffU));
  out += header;
  out.reserve(out.size() + matrix.values.size() * 8);
  for (const int64_t value : matrix.values) append_le64(out, value);
  return out;
}

Int64Matrix read_npy_int64(std::string_view bytes) {
  require(bytes.size() >= kPreambleBytes && bytes.substr(0, 6) == kMagic, "not an .npy file (bad magic)");
  require(bytes[6] == '\x01' && bytes[7] == '\x00', ".npy version ", static_cast<int>(bytes[6]), ".",
          static_cast<int>(bytes[7]), " is not supported (expected 1.0)");
  const size_t header_len =
      size_t{static_cast<unsigned char>(bytes[8])} | (size_t{static_cast<unsigned char>(bytes[9])} << 8U);
  require(bytes.size() >= kPreambleBytes + header_len, ".npy header of ", header_len, " bytes runs past the end");
  const std::string header(bytes.substr(kPreambleBytes, header_len));
  static const std::regex pattern(
      R"(^\{'descr': '<i8', 'fortran_order': False, 'shape': \((\d{1,12}), (\d{1,12})\), \}\s*$)");
  std::smatch match;
  require(std::regex_match(header, match, pattern), ".npy header is not a 2-D '<i8' C-order array: ", header);
  Int64Matrix matrix;
  matrix.rows = std::stoll(match[1].str());
  matrix.cols = std::stoll(match[2].str());
  const size_t data = kPreambleBytes + header_len;
  const uint64_t available = (bytes.size() - data) / 8;
  const auto rows = static_cast<uint64_t>(matrix.rows);
  const auto cols = static_cast<uint64_t>(matrix.cols);
  // Compare by division first: a hostile shape must not overflow the product.
  require(cols == 0 || rows <= available / cols, ".npy shape (", matrix.rows, ", ", matrix.cols,
          ") needs more data than the ", bytes.size() - data, " bytes present");
  const uint64_t count = rows * cols;
  require(bytes.size() - data == count * 8, ".npy data has ", bytes.size() - data, " bytes but shape (", matrix.rows,
          ", ", matrix.cols, ") needs ", count * 8);
  matrix.values.resize(static_cast<size_t>(count));
  for (size_t i = 0; i < matrix.values.size(); ++i) matrix.values[i] = read_le64(bytes, data + 8 * i);
  return matrix;
}

}  // namespace sparsering
