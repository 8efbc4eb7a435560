// Trace file round trips and the reader's defences against malformed and hostile files.
#include "traces/safetensors_trace.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "common/error.hpp"
#include "trace_test_util.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

using testing::as_bytes;
using testing::random_trace;
using testing::safetensors_bytes;
using testing::split_safetensors;
using Json = nlohmann::json;

void expect_equal(const Trace& a, const Trace& b) {
  EXPECT_EQ(a.metadata.model, b.metadata.model);
  EXPECT_EQ(a.metadata.source, b.metadata.source);
  EXPECT_EQ(a.metadata.last_q, b.metadata.last_q);
  EXPECT_EQ(a.metadata.block_q, b.metadata.block_q);
  EXPECT_EQ(a.metadata.block_k, b.metadata.block_k);
  EXPECT_EQ(a.metadata.provenance, b.metadata.provenance);
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_EQ(a.layers, b.layers);
  EXPECT_EQ(a.heads, b.heads);
  EXPECT_EQ(a.vertical_candidates, b.vertical_candidates);
  EXPECT_EQ(a.slash_candidates, b.slash_candidates);
  EXPECT_EQ(a.vertical_index, b.vertical_index);
  EXPECT_EQ(a.vertical_mass, b.vertical_mass);
  EXPECT_EQ(a.slash_offset, b.slash_offset);
  EXPECT_EQ(a.slash_mass, b.slash_mass);
  EXPECT_EQ(a.sample_seq_len, b.sample_seq_len);
}

// Parses `bytes` and returns the InputError message ("" if it parsed).
std::string parse_error(const std::string& bytes, const std::string& name = "bad.safetensors") {
  try {
    parse_trace(as_bytes(bytes), name);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string rebuild(const Json& header, const std::string& data) { return safetensors_bytes(header.dump(), data); }

class SafetensorsTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    trace_ = random_trace(sparsering::testing_support::test_seed(), 2, 3, 4, 5, 6, 40);
    trace_.metadata.last_q = 32;
    trace_.metadata.block_q = 128;
    bytes_ = serialize_trace(trace_);
    std::tie(header_, data_) = split_safetensors(bytes_);
  }
  Trace trace_;
  std::string bytes_;
  Json header_;
  std::string data_;
};

TEST_F(SafetensorsTraceTest, RoundTripKeepsEveryField) {
  expect_equal(trace_, parse_trace(as_bytes(bytes_), "memory"));
}

TEST_F(SafetensorsTraceTest, RoundTripThroughFiles) {
  const auto dir = std::filesystem::temp_directory_path() / ("sparsering_trace_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / "t.safetensors";
  write_trace(path, trace_, false);
  expect_equal(trace_, read_trace(path));
  // No overwrite without permission; the file stays as it was.
  Trace other = random_trace(sparsering::testing_support::fixed_seed(7), 1, 1, 1, 2, 2, 10);
  EXPECT_THROW(write_trace(path, other, false), InputError);
  expect_equal(trace_, read_trace(path));
  write_trace(path, other, true);
  expect_equal(other, read_trace(path));
  // An invalid trace is refused before anything is written.
  Trace invalid = other;
  invalid.vertical_index[0] = 99;
  const auto invalid_path = dir / "invalid.safetensors";
  EXPECT_THROW(write_trace(invalid_path, invalid, false), InputError);
  EXPECT_FALSE(std::filesystem::exists(invalid_path));
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
  }
  EXPECT_THROW(read_trace(dir / "missing.safetensors"), InputError);
  EXPECT_THROW(read_trace(dir), InputError);
  std::filesystem::remove_all(dir);
}

TEST_F(SafetensorsTraceTest, LayoutFollowsSafetensorsConventions) {
  uint64_t n = 0;
  std::memcpy(&n, bytes_.data(), 8);
  EXPECT_EQ(n % 8, 0u) << "header padded to 8 bytes";
  EXPECT_EQ(bytes_[8], '{');
  EXPECT_EQ(header_["__metadata__"]["format"], "sparsering-trace");
  EXPECT_EQ(header_["__metadata__"]["version"], "1");
  EXPECT_EQ(header_["__metadata__"]["last_q"], "32");
  EXPECT_EQ(header_["__metadata__"]["provenance.note"], "random test trace");
  EXPECT_EQ(header_["vertical.index"]["dtype"], "I32");
  EXPECT_EQ(header_["vertical.index"]["shape"], Json({2, 3, 4, 5}));
  EXPECT_EQ(header_["slash.mass"]["shape"], Json({2, 3, 4, 6}));
  EXPECT_EQ(header_["sample.seq_len"]["dtype"], "I64");
  for (const auto& [name, info] : header_.items()) {
    if (name == "__metadata__") continue;
    const uint64_t begin = info["data_offsets"][0];
    const size_t element = info["dtype"] == "I64" ? 8 : 4;
    EXPECT_EQ(begin % element, 0u) << name << " aligned";
  }
  // A header written the way Python does it (padded with spaces, keys in another order) reads.
  std::string text = header_.dump(1);
  text.append(8 - text.size() % 8, ' ');
  expect_equal(trace_, parse_trace(as_bytes(safetensors_bytes(text, data_)), "python"));
}

TEST_F(SafetensorsTraceTest, EveryTruncationIsAnInputError) {
  for (size_t cut = 0; cut < bytes_.size(); ++cut) {
    const std::string message = parse_error(bytes_.substr(0, cut), "cut.safetensors");
    ASSERT_NE(message, "") << "prefix of " << cut << " bytes parsed";
    EXPECT_EQ(message.rfind("cut.safetensors: ", 0), 0u) << message;
  }
}

TEST_F(SafetensorsTraceTest, AbsurdHeaderLengths) {
  for (const uint64_t n :
       {uint64_t{0}, uint64_t{1} << 40, ~uint64_t{0}, uint64_t{200} << 20, static_cast<uint64_t>(bytes_.size())}) {
    std::string bytes = bytes_;
    std::memcpy(bytes.data(), &n, 8);
    EXPECT_NE(parse_error(bytes), "") << n;
  }
  EXPECT_NE(parse_error(std::string(7, '\0')).find("too short"), std::string::npos);
  std::string big = bytes_;
  const uint64_t n = (uint64_t{100} << 20) + 1;
  std::memcpy(big.data(), &n, 8);
  EXPECT_NE(parse_error(big).find("exceeds the limit"), std::string::npos);
}

TEST_F(SafetensorsTraceTest, BadJson) {
  EXPECT_NE(parse_error(safetensors_bytes("{\"a\": ", data_)).find("does not parse"), std::string::npos);
  EXPECT_NE(parse_error(safetensors_bytes("[1, 2]  ", data_)).find("must be an object"), std::string::npos);
  EXPECT_NE(parse_error(safetensors_bytes("\xff\xfe{}    ", data_)), "");
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(parse_error(safetensors_bytes(deep, "")).find("nests deeper"), std::string::npos);
  const std::string deep_in_string = "{\"x\": \"[[[[[[[[[[[[[[[[[[\"}";
  EXPECT_EQ(parse_error(safetensors_bytes(deep_in_string, "")).find("nests deeper"), std::string::npos);
}

TEST_F(SafetensorsTraceTest, TensorEntryErrorsNameTheTensor) {
  auto expect_error = [&](const Json& header, const std::string& data, const std::string& needle) {
    const std::string message = parse_error(rebuild(header, data));
    EXPECT_NE(message.find(needle), std::string::npos) << "got: " << message;
    EXPECT_EQ(message.rfind("bad.safetensors: ", 0), 0u) << message;
  };
  Json h = header_;
  h["vertical.mass"]["dtype"] = "I32";
  expect_error(h, data_, "'vertical.mass' has dtype I32, expected F32");
  h = header_;
  h["vertical.mass"]["dtype"] = "Q7";
  expect_error(h, data_, "unknown dtype 'Q7'");
  h = header_;
  h["vertical.mass"]["dtype"] = 3;
  expect_error(h, data_, "dtype is missing or not a string");
  h = header_;
  h["slash.offset"]["shape"] = {2, 3, 4, 3, 2};  // same element count, wrong rank
  expect_error(h, data_, "'slash.offset' has 5 dimensions");
  h = header_;
  h["slash.offset"]["shape"] = {2, 3, 4, 7};
  expect_error(h, data_, "'slash.offset': data_offsets");
  h = header_;
  h["slash.offset"]["shape"] = {2, -3, 4, 6};
  expect_error(h, data_, "not an integer");
  h = header_;
  h["slash.offset"]["shape"] = {2, 3.5, 4, 6};
  expect_error(h, data_, "not an integer");
  h = header_;
  h["slash.offset"]["shape"] = {1u << 30, 1u << 30, 1u << 30, 1u << 30};
  expect_error(h, data_, "needs more bytes than the file has");
  h = header_;
  h["slash.offset"]["bogus"] = 1;
  expect_error(h, data_, "unknown key 'bogus'");
  h = header_;
  h["slash.offset"]["data_offsets"] = {0};
  expect_error(h, data_, "two non-negative integers");
  h = header_;
  h["slash.offset"]["data_offsets"] = {-8, 0};
  expect_error(h, data_, "two non-negative integers");
  h = header_;
  h["vertical.index"] = "nope";
  expect_error(h, data_, "tensor 'vertical.index': entry must be an object");
}

TEST_F(SafetensorsTraceTest, ShapesMustAgree) {
  // Reinterpret the same bytes with a different split of S, L, H: vertical.* stay consistent with
  // their byte sizes, but no longer agree with slash.* / sample.seq_len.
  Json h = header_;
  h["vertical.index"]["shape"] = {2, 4, 3, 5};
  h["vertical.mass"]["shape"] = {2, 4, 3, 5};
  EXPECT_NE(parse_error(rebuild(h, data_)).find("disagree in dimension 1"), std::string::npos);
  h = header_;
  h["vertical.mass"]["shape"] = {2, 3, 5, 4};
  EXPECT_NE(parse_error(rebuild(h, data_)).find("'vertical.mass' has shape [2, 3, 5, 4]"), std::string::npos);
}

TEST_F(SafetensorsTraceTest, OffsetsMustTileTheDataSection) {
  const uint64_t vi0 = header_["vertical.index"]["data_offsets"][0];
  const uint64_t vi1 = header_["vertical.index"]["data_offsets"][1];
  Json h = header_;
  h["vertical.index"]["data_offsets"] = {vi0 - 4, vi1 - 4};  // overlaps the tensor before it
  EXPECT_NE(parse_error(rebuild(h, data_)).find("overlap"), std::string::npos);
  h = header_;
  h["vertical.index"]["data_offsets"] = {vi0 + 4, vi1 + 4};  // overlaps the one after, leaves a gap
  EXPECT_NE(parse_error(rebuild(h, data_)), "");
  h = header_;
  h["vertical.index"]["data_offsets"] = {vi1, vi0};
  EXPECT_NE(parse_error(rebuild(h, data_)).find("reversed"), std::string::npos);
  h = header_;
  h["slash.mass"]["data_offsets"][1] = data_.size() + 4;
  EXPECT_NE(parse_error(rebuild(h, data_)).find("past the data section"), std::string::npos);
  EXPECT_NE(parse_error(rebuild(header_, data_ + "junk")).find("after the last tensor"), std::string::npos);
  // Two tensors claiming the same bytes.
  h = header_;
  h["extra"] = header_["vertical.mass"];
  EXPECT_NE(parse_error(rebuild(h, data_)).find("overlap"), std::string::npos);
}

TEST_F(SafetensorsTraceTest, UnknownTensorsAreCheckedThenIgnored) {
  Json h = header_;
  h["capture.debug"] = {{"dtype", "BF16"}, {"shape", {3}}, {"data_offsets", {data_.size(), data_.size() + 6}}};
  expect_equal(trace_, parse_trace(as_bytes(rebuild(h, data_ + "abcdef")), "extra"));
  h["capture.debug"]["shape"] = {4};
  EXPECT_NE(parse_error(rebuild(h, data_ + "abcdef")).find("'capture.debug'"), std::string::npos);
}

TEST_F(SafetensorsTraceTest, MissingTensorsAndMetadata) {
  for (const char* name : {"vertical.index", "vertical.mass", "slash.offset", "slash.mass", "sample.seq_len"}) {
    Json h = header_;
    const uint64_t begin = h[name]["data_offsets"][0], end = h[name]["data_offsets"][1];
    h.erase(name);
    // Keep the tiling valid by renaming the bytes to an unknown tensor.
    h["renamed"] = {{"dtype", "U8"}, {"shape", {end - begin}}, {"data_offsets", {begin, end}}};
    EXPECT_NE(parse_error(rebuild(h, data_)).find(std::string("required tensor '") + name + "' is missing"),
              std::string::npos);
  }
  Json h = header_;
  h.erase("__metadata__");
  EXPECT_NE(parse_error(rebuild(h, data_)).find("no __metadata__"), std::string::npos);
  for (const char* key : {"format", "version", "model", "source", "last_q", "block_q", "block_k"}) {
    h = header_;
    h["__metadata__"].erase(key);
    EXPECT_NE(parse_error(rebuild(h, data_)).find(key), std::string::npos) << key;
  }
  h = header_;
  h["__metadata__"]["format"] = "something-else";
  EXPECT_NE(parse_error(rebuild(h, data_)).find("'format' must be 'sparsering-trace'"), std::string::npos);
  h = header_;
  h["__metadata__"]["version"] = "2";
  EXPECT_NE(parse_error(rebuild(h, data_)).find("'version' must be '1'"), std::string::npos);
  h = header_;
  h["__metadata__"]["last_q"] = 64;
  EXPECT_NE(parse_error(rebuild(h, data_)).find("must be a string"), std::string::npos);
  for (const char* bad : {"", "64x", "-1", "0", "99999999999", " 64"}) {
    h = header_;
    h["__metadata__"]["block_k"] = bad;
    EXPECT_NE(parse_error(rebuild(h, data_)).find("'block_k' must be an integer"), std::string::npos) << bad;
  }
  h = header_;
  h["__metadata__"]["note_from_python"] = "hello";
  EXPECT_EQ(parse_trace(as_bytes(rebuild(h, data_)), "x").metadata.provenance.at("note_from_python"), "hello");
}

TEST_F(SafetensorsTraceTest, ZeroSizedDimensions) {
  Trace t = random_trace(sparsering::testing_support::fixed_seed(3), 1, 2, 2, 0, 3, 16);
  expect_equal(t, parse_trace(as_bytes(serialize_trace(t)), "no-verticals"));
  // S x L x H with no slot at all would be unbounded by the file size: refused.
  Json h;
  h["__metadata__"] = split_safetensors(serialize_trace(t)).first["__metadata__"];
  std::string seq_len(8, '\0');
  seq_len[0] = 16;
  const Json empty_shape = {1, 1 << 20, 1 << 15, 0};
  for (const char* name : {"vertical.index", "vertical.mass", "slash.offset", "slash.mass"}) {
    h[name] = {{"dtype", std::string(name).find("mass") != std::string::npos ? "F32" : "I32"},
               {"shape", empty_shape},
               {"data_offsets", {8, 8}}};
  }
  h["sample.seq_len"] = {{"dtype", "I64"}, {"shape", {1}}, {"data_offsets", {0, 8}}};
  EXPECT_NE(parse_error(rebuild(h, seq_len)).find("needs more bytes than the file has"), std::string::npos);
  h["vertical.index"]["shape"] = h["vertical.mass"]["shape"] = h["slash.offset"]["shape"] = h["slash.mass"]["shape"] =
      Json({1, 2, 2, 0});
  EXPECT_NE(parse_error(rebuild(h, seq_len)).find("0 candidate slots"), std::string::npos);
}

// Overwrites element `i` of tensor `name` in the data section.
template <typename T>
std::string with_value(const Json& header, std::string data, const char* name, size_t i, T value) {
  const uint64_t begin = header[name]["data_offsets"][0];
  std::memcpy(data.data() + begin + i * sizeof(T), &value, sizeof(T));
  return rebuild(header, data);
}

TEST_F(SafetensorsTraceTest, ContentIsValidated) {
  // Slot 0 of every head is real when it has any candidate; find a head with >= 2 real verticals.
  size_t slot = 0;
  while (slot + 1 < trace_.vertical_index.size() &&
         (trace_.vertical_index[slot] < 0 || trace_.vertical_index[slot + 1] < 0 || (slot + 1) % 5 == 0)) {
    ++slot;
  }
  ASSERT_LT(slot + 1, trace_.vertical_index.size()) << "random trace has no head with two verticals";
  EXPECT_NE(parse_error(with_value<int32_t>(header_, data_, "vertical.index", slot, 40)).find("outside [0, 40)"),
            std::string::npos);
  EXPECT_NE(parse_error(with_value<int32_t>(header_, data_, "vertical.index", slot, -7)).find("vertical.index"),
            std::string::npos);
  EXPECT_NE(parse_error(with_value<int32_t>(header_, data_, "vertical.index", slot, trace_.vertical_index[slot + 1]))
                .find("twice"),
            std::string::npos);
  EXPECT_NE(parse_error(with_value<float>(header_, data_, "vertical.mass", slot + 1, 0.999f)).find("sorted by mass"),
            std::string::npos);
  EXPECT_NE(parse_error(with_value<float>(header_, data_, "vertical.mass", slot, std::nanf(""))).find("not in [0, 1]"),
            std::string::npos);
  EXPECT_NE(parse_error(with_value<int64_t>(header_, data_, "sample.seq_len", 0, 0)).find("sample.seq_len[0]"),
            std::string::npos);
  EXPECT_NE(
      parse_error(with_value<int64_t>(header_, data_, "sample.seq_len", 1, int64_t{1} << 40)).find("sample.seq_len[1]"),
      std::string::npos);
}

}  // namespace
}  // namespace sparsering
