// The safetensors container reader: a valid container reads back from memory and from a file,
// and a truncated header, offsets out of range, overlapping tensors and wrong or unknown dtypes
// are InputErrors that start with the container's name and name the tensor.
#include "traces/safetensors_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace sparsering {
namespace {

using Json = nlohmann::json;

/// Length prefix, header text and data, as a container's bytes.
std::string container(const std::string& header, const std::string& data) {
  const uint64_t n = header.size();
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &n, 8);
  return bytes + header + data;
}

std::span<const std::byte> as_bytes(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

/// "a": I32 [2, 3] at [0, 24), "b": BF16 [4] at [24, 32), metadata {"note": "hi"}.
struct ValidContainer {
  Json header;
  std::string data;

  ValidContainer() {
    for (int32_t i = 0; i < 6; ++i) data.append(reinterpret_cast<const char*>(&i), 4);
    for (uint16_t i = 0; i < 4; ++i) {
      const auto bits = static_cast<uint16_t>(0x3f80 + i);
      data.append(reinterpret_cast<const char*>(&bits), 2);
    }
    header["a"] = {{"dtype", "I32"}, {"shape", {2, 3}}, {"data_offsets", {0, 24}}};
    header["b"] = {{"dtype", "BF16"}, {"shape", {4}}, {"data_offsets", {24, 32}}};
    header["__metadata__"] = {{"note", "hi"}};
  }
  std::string bytes() const { return container(header.dump(), data); }
};

std::string error_of(const std::string& bytes) {
  try {
    (void)SafetensorsFile::parse(as_bytes(bytes), "c.safetensors");
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("c.safetensors: ", 0), 0u) << message;
    return message;
  }
  return "";
}

void expect_error(const std::string& bytes, const std::string& needle) {
  const std::string message = error_of(bytes);
  EXPECT_NE(message.find(needle), std::string::npos) << "expected '" << needle << "', got '" << message << "'";
}

TEST(SafetensorsFile, ReadsAValidContainerFromMemory) {
  const ValidContainer valid;
  const std::string bytes = valid.bytes();
  const SafetensorsFile file = SafetensorsFile::parse(as_bytes(bytes), "c.safetensors");
  ASSERT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.tensors()[0].name, "a");  // data-offset order
  EXPECT_EQ(file.data_bytes(), 32u);
  ASSERT_TRUE(file.metadata().has_value());
  EXPECT_EQ(file.metadata()->at("note"), "hi");
  const SafetensorsTensor& a = file.require_tensor("a", "I32", 2);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(file.read<int32_t>(a), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(file.read<uint16_t>(file.require_tensor("b", "BF16", 1)),
            (std::vector<uint16_t>{0x3f80, 0x3f81, 0x3f82, 0x3f83}));
  EXPECT_EQ(file.find("c"), nullptr);
  // Reading with an element type of the wrong size is a caller bug, not bad input.
  EXPECT_THROW((void)file.read<int64_t>(a), std::invalid_argument);

  Json no_metadata = valid.header;
  no_metadata.erase("__metadata__");
  const std::string plain = container(no_metadata.dump(), valid.data);
  EXPECT_FALSE(SafetensorsFile::parse(as_bytes(plain), "plain").metadata().has_value());
}

TEST(SafetensorsFile, ReadsAFileHeaderFirstThenEachTensorsBytes) {
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "safetensors_file_test";
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / "c.safetensors";
  const ValidContainer valid;
  {
    std::ofstream out(path, std::ios::binary);
    const std::string bytes = valid.bytes();
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.name(), path.string());
  EXPECT_EQ(file.read<int32_t>(file.require_tensor("a", "I32", 2)), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(file.read<uint16_t>(file.require_tensor("b", "BF16", 1))[3], 0x3f83);

  // Tensor bytes are read when asked for: a file cut after open() fails on the read, naming it.
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
  try {
    (void)file.read<uint16_t>(file.require_tensor("b", "BF16", 1));
    FAIL() << "read past the end of a shortened file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("short read of tensor 'b'"), std::string::npos) << e.what();
  }
  // Opened again, the header no longer matches the file.
  EXPECT_THROW((void)SafetensorsFile::open(path), InputError);
  EXPECT_THROW((void)SafetensorsFile::open(dir / "missing.safetensors"), InputError);
  EXPECT_THROW((void)SafetensorsFile::open(dir), InputError);
  std::filesystem::remove_all(dir);
}

TEST(SafetensorsFile, TruncatedHeader) {
  const std::string bytes = ValidContainer().bytes();
  expect_error(bytes.substr(0, 5), "file is 5 bytes, too short for the 8-byte header length");
  expect_error(bytes.substr(0, 20), "runs past the end of the file (20 bytes)");
  for (size_t cut = 0; cut < bytes.size(); ++cut) EXPECT_NE(error_of(bytes.substr(0, cut)), "") << cut;
  std::string zero = bytes;
  std::memset(zero.data(), 0, 8);
  expect_error(zero, "header length is 0");
  std::string huge = bytes;
  const uint64_t n = kMaxSafetensorsHeaderBytes + 1;
  std::memcpy(huge.data(), &n, 8);
  expect_error(huge, "exceeds the limit");
  expect_error(container("{\"a\": ", ""), "JSON header does not parse");
  expect_error(container("[1, 2]", ""), "JSON header must be an object");
  expect_error(container(std::string(100, '[') + std::string(100, ']'), ""), "nests deeper");
}

TEST(SafetensorsFile, OffsetsOutOfRange) {
  const ValidContainer valid;
  Json h = valid.header;
  h["b"]["data_offsets"] = {24, 40};
  h["b"]["shape"] = {8};
  expect_error(container(h.dump(), valid.data),
               "tensor 'b': data_offsets end 40 lies past the data section (32 bytes)");
  h = valid.header;
  h["b"]["data_offsets"] = {32, 24};
  expect_error(container(h.dump(), valid.data), "tensor 'b': data_offsets [32, 24] are reversed");
  h = valid.header;
  h["b"]["data_offsets"] = {-8, 0};
  expect_error(container(h.dump(), valid.data), "tensor 'b': data_offsets must be a list of two non-negative integers");
  h = valid.header;
  h["b"]["shape"] = {3};
  expect_error(container(h.dump(), valid.data), "tensor 'b': data_offsets [24, 32] span 8 bytes, but dtype BF16");
  h = valid.header;
  h["b"]["shape"] = {1u << 30, 1u << 30};
  expect_error(container(h.dump(), valid.data), "tensor 'b': shape [1073741824,1073741824] needs more bytes");
  expect_error(container(valid.header.dump(), valid.data + "xy"), "2 bytes after the last tensor");
}

TEST(SafetensorsFile, OverlappingTensorsAndGaps) {
  const ValidContainer valid;
  Json h = valid.header;
  h["c"] = h["b"];  // the same bytes twice
  expect_error(container(h.dump(), valid.data), "tensors 'b' and 'c' overlap");
  h = valid.header;
  h["a"]["data_offsets"] = {8, 32};
  h["a"]["shape"] = {6};
  h["b"]["data_offsets"] = {0, 8};
  h["b"]["shape"] = {4};
  EXPECT_EQ(error_of(container(h.dump(), valid.data)), "");  // header order need not be data order
  h["b"]["data_offsets"] = {0, 10};
  h["b"]["shape"] = {5};
  expect_error(container(h.dump(), valid.data), "tensors 'b' and 'a' overlap");
  h = valid.header;
  h["a"]["data_offsets"] = {2, 26};
  h["b"]["data_offsets"] = {26, 34};
  expect_error(container(h.dump(), valid.data + "zz"), "bytes [0, 2) of the data section belong to no tensor");
}

TEST(SafetensorsFile, WrongOrUnknownDtype) {
  const ValidContainer valid;
  Json h = valid.header;
  h["b"]["dtype"] = "Q7";
  expect_error(container(h.dump(), valid.data), "tensor 'b': unknown dtype 'Q7'");
  h["b"]["dtype"] = 3;
  expect_error(container(h.dump(), valid.data), "tensor 'b': dtype is missing or not a string");
  h = valid.header;
  h["b"]["bogus"] = 1;
  expect_error(container(h.dump(), valid.data), "tensor 'b': unknown key 'bogus'");
  h = valid.header;
  h["__metadata__"]["n"] = 3;
  expect_error(container(h.dump(), valid.data), "__metadata__ 'n' must be a string");

  const std::string bytes = valid.bytes();
  const SafetensorsFile file = SafetensorsFile::parse(as_bytes(bytes), "c.safetensors");
  const auto require_error = [&](const char* name, const char* dtype, size_t rank) {
    try {
      (void)file.require_tensor(name, dtype, rank);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(require_error("b", "F32", 1), "c.safetensors: tensor 'b' has dtype BF16, expected F32");
  EXPECT_EQ(require_error("a", "I32", 3), "c.safetensors: tensor 'a' has 2 dimensions, expected 3");
  EXPECT_EQ(require_error("q", "I32", 1), "c.safetensors: required tensor 'q' is missing");
  EXPECT_EQ(safetensors_dtype_bytes("BF16"), 2);
  EXPECT_EQ(safetensors_dtype_bytes("F64"), 8);
  EXPECT_EQ(safetensors_dtype_bytes("bf16"), 0);
}

TEST(SafetensorsFile, HeaderWithANulByteIsRefusedAsThePythonReaderRefusesIt) {
  // Valid JSON, then a NUL and garbage inside the declared header length: the JSON parser alone
  // would stop at the NUL and accept it.
  const ValidContainer valid;
  expect_error(container(valid.header.dump() + std::string(1, '\0') + "garbage", valid.data),
               "JSON header holds a NUL byte at offset");
  // Trailing spaces (the padding safetensors writers use) stay valid.
  EXPECT_NO_THROW((void)SafetensorsFile::parse(as_bytes(container(valid.header.dump() + "    ", valid.data)), "pad"));
}

TEST(SafetensorsFile, SpecialFilesAreRefusedWithoutBlocking) {
  const std::filesystem::path fifo = std::filesystem::temp_directory_path() /
                                     ("sparsering_fifo_" + std::to_string(::getpid()) + ".safetensors");
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    (void)SafetensorsFile::open(fifo);
    ADD_FAILURE() << "a FIFO was opened as a container";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("FIFO"), std::string::npos) << e.what();
  }
  std::filesystem::remove(fifo);
  EXPECT_THROW((void)SafetensorsFile::open("/dev/zero"), InputError);
}

}  // namespace
}  // namespace sparsering
