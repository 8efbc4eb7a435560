// The YAML helper: syntax errors carry line and column, typed reads name the key path and value,
// unknown/duplicate keys are caught, hostile documents (deep nesting, huge numbers, NaN, wrong node
// types, aliases) end in InputError, and number formatting round-trips.
#include "common/yaml_reader.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <limits>
#include <random>

#include "common/error.hpp"
#include "tests/config/config_test_util.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering::yaml {
namespace {

using test::expect_input_error;

YAML::Node value_of(const std::string& text) { return parse_document("v: " + text + "\n", "t.yaml")["v"]; }

TEST(YamlReader, SyntaxErrorsNameSourceLineAndColumn) {
  expect_input_error([] { parse_document("a: 1\nb: [1, 2\n", "bad.yaml"); }, {"bad.yaml:", "YAML syntax error"});
  try {
    parse_document("a: 1\nb: c: d\n", "bad.yaml");
    FAIL() << "expected a syntax error";
  } catch (const InputError& error) {
    EXPECT_EQ(std::string(error.what()).rfind("bad.yaml:2:", 0), 0U) << error.what();
  }
  expect_input_error([] { parse_document("a: 'unterminated", "q.yaml"); }, {"q.yaml:1:", "illegal EOF in scalar"});
  expect_input_error([] { parse_document("{a: 1", "f.yaml"); }, {"f.yaml:1:1: YAML syntax error"});
  expect_input_error([] { parse_document("a: *missing\n", "alias.yaml"); }, {"alias.yaml:"});
}

TEST(YamlReader, DeepNestingIsAnErrorNotACrash) {
  for (const char* open : {"[", "{a: "}) {
    std::string text;
    for (int i = 0; i < 100000; ++i) text += open;
    expect_input_error([&] { parse_document(text, "deep.yaml"); }, {"deep.yaml:"});
  }
  std::string block;
  for (int i = 0; i < 5000; ++i) block += std::string(static_cast<size_t>(i), ' ') + "- \n";
  // Whatever yaml-cpp makes of it, reading it as a mapping fails cleanly.
  try {
    const YAML::Node node = parse_document(block, "indent.yaml");
    expect_input_error([&] { MapReader map(node, "x"); }, {"x must be a mapping"});
  } catch (const InputError&) {
  }
}

TEST(YamlReader, OversizedDocumentsAreRejected) {
  const std::string text(kMaxDocumentBytes + 1, '#');
  expect_input_error([&] { parse_document(text, "big.yaml"); }, {"big.yaml", "bytes"});
}

TEST(YamlReader, OversizedFilesAreRefusedBeforeReading) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("sparsering-big-" + std::to_string(std::random_device{}()) + ".yaml");
  { std::ofstream create(path); }
  std::filesystem::resize_file(path, kMaxDocumentBytes + 1);
  expect_input_error([&] { read_config_file(path); }, {path.string(), "more than the"});
  std::filesystem::remove(path);
  expect_input_error([] { read_config_file("/nonexistent/x.yaml"); }, {"/nonexistent/x.yaml"});
}

TEST(YamlReader, Integers) {
  EXPECT_EQ(to_int(value_of("42"), "k", 0), 42);
  EXPECT_EQ(to_int(value_of("+7"), "k", 0), 7);
  EXPECT_EQ(to_int(value_of("-3"), "k", -5), -3);
  EXPECT_EQ(to_int(value_of("9223372036854775807"), "k", 0), std::numeric_limits<int64_t>::max());
  expect_input_error([] { to_int(value_of("9223372036854775808"), "a.b", 0); }, {"a.b must be an integer >= 0", "64-bit"});
  expect_input_error([] { to_int(value_of("abc"), "a.b", 1); }, {"a.b must be an integer >= 1, got \"abc\""});
  expect_input_error([] { to_int(value_of("0x10"), "a.b", 1); }, {"a.b", "0x10"});
  expect_input_error([] { to_int(value_of("1e3"), "a.b", 1); }, {"a.b", "got 1e3"});
  expect_input_error([] { to_int(value_of("\"12\""), "a.b", 1); }, {"a.b", "got \"12\""});
  expect_input_error([] { to_int(value_of("5"), "a.b", 1, 4); }, {"a.b must be an integer in [1, 4], got 5"});
  expect_input_error([] { to_int(value_of("{x: 1}"), "a.b", 1); }, {"a.b", "got a mapping"});
  expect_input_error([] { to_int(value_of("~"), "a.b", 1); }, {"a.b", "got null"});
  expect_input_error([] { to_int(value_of("12abc"), "a.b", 1); }, {"a.b", "12abc"});
  expect_input_error([] { to_int(value_of("\"\""), "a.b", 1); }, {"a.b"});
}

TEST(YamlReader, NumbersRejectNanInfinityAndOverflow) {
  EXPECT_DOUBLE_EQ(to_number(value_of("2.5"), "k"), 2.5);
  EXPECT_DOUBLE_EQ(to_number(value_of("-1e-3"), "k"), -1e-3);
  EXPECT_DOUBLE_EQ(to_number(value_of("3"), "k"), 3.0);
  EXPECT_DOUBLE_EQ(to_number(value_of(".5"), "k"), 0.5);
  for (const char* bad : {".nan", ".NaN", "nan", ".inf", "-.inf", "inf", "infinity", "1e999", "-1e999", "1.2.3", "0x1p3", ""}) {
    expect_input_error([&] { to_number(value_of(bad), "x.y", NumberBounds::positive()); }, {"x.y must be a finite number > 0"});
  }
  expect_input_error([] { to_number(value_of("-3"), "cluster.inter_node.bandwidth_gbytes_per_s", NumberBounds::positive()); },
                     {"cluster.inter_node.bandwidth_gbytes_per_s must be > 0, got -3"});
  expect_input_error([] { to_number(value_of("0"), "p", NumberBounds::left_open(0, 1)); }, {"p must be in (0, 1], got 0"});
  expect_input_error([] { to_number(value_of("1.5"), "p", NumberBounds::closed(0, 1)); }, {"p must be in [0, 1], got 1.5"});
}

TEST(YamlReader, BooleansStringsChoicesNames) {
  EXPECT_TRUE(to_bool(value_of("true"), "b"));
  EXPECT_FALSE(to_bool(value_of("False"), "b"));
  expect_input_error([] { to_bool(value_of("yes"), "b.c"); }, {"b.c must be true or false, got \"yes\""});
  expect_input_error([] { to_bool(value_of("\"true\""), "b.c"); }, {"b.c must be true or false"});
  EXPECT_EQ(to_string(value_of("\"12\""), "s"), "12");
  expect_input_error([] { to_string(value_of("[a]"), "s.t"); }, {"s.t must be a string, got a sequence"});
  expect_input_error([] { to_string(value_of("\"\""), "s.t"); }, {"s.t must not be empty"});
  // Invalid UTF-8 (a lone continuation byte) never reaches the program, which would print it.
  expect_input_error([] { to_string(value_of("\"a\x80" "b\""), "s.t"); }, {"s.t is not valid UTF-8"});
  EXPECT_EQ(to_choice(value_of("b"), "c", {"a", "b"}), "b");
  expect_input_error([] { to_choice(value_of("z"), "c.d", {"a", "b"}); }, {"c.d must be one of a, b; got \"z\""});
  EXPECT_EQ(to_name(value_of("h100-sxm_2.0"), "n"), "h100-sxm_2.0");
  expect_input_error([] { to_name(value_of("\"\""), "n.m"); }, {"n.m must not be empty"});
  for (const char* bad : {"../x", "a/b", ".hidden", "with space", "\"a\\nb\""}) {
    expect_input_error([&] { to_name(value_of(bad), "n.m"); }, {"n.m must be a name"});
  }
  expect_input_error([] { to_name(value_of(std::string(129, 'a')), "n.m"); }, {"n.m must be a name"});
}

TEST(YamlReader, SequencesAreBounded) {
  EXPECT_EQ(to_sequence(value_of("[1, 2, 3]"), "s", 3).size(), 3U);
  expect_input_error([] { to_sequence(value_of("[1, 2, 3]"), "s.q", 2); }, {"s.q has 3 items, more than the 2 allowed"});
  expect_input_error([] { to_sequence(value_of("1"), "s.q", 2); }, {"s.q must be a sequence, got 1"});
}

TEST(YamlReader, MapReaderRejectsUnknownDuplicateAndComplexKeys) {
  {
    MapReader map(parse_document("alpha: 1\nbeta: 2\n", "m.yaml"), "root");
    EXPECT_EQ(map.required_int("alpha", 0), 1);
    EXPECT_FALSE(map.has("gamma"));
    expect_input_error([&] { map.finish(); }, {"unknown key root.beta", "valid keys: alpha, gamma"});
  }
  {
    MapReader map(parse_document("bandwith_gbytes_per_s: 1\n", "m.yaml"), "c.intra");
    map.optional_number("bandwidth_gbytes_per_s", 0.0);
    expect_input_error([&] { map.finish(); }, {"unknown key c.intra.bandwith_gbytes_per_s", "(did you mean bandwidth_gbytes_per_s?)"});
  }
  expect_input_error([] { MapReader map(parse_document("a: 1\na: 2\n", "m.yaml"), "r"); }, {"r.a appears more than once"});
  expect_input_error([] { MapReader map(parse_document("? [1, 2]\n: 3\n", "m.yaml"), "r"); },
                     {"r has a key that is a sequence"});
  expect_input_error([] { MapReader map(parse_document("[1]", "m.yaml"), "r"); }, {"r must be a mapping, got a sequence"});
  {
    MapReader map(parse_document("a:\nb: ~\n", "m.yaml"), "r");
    EXPECT_FALSE(map.optional("a").has_value());
    EXPECT_EQ(map.optional_int("b", 9, 0), 9);
    expect_input_error([&] { map.required("a"); }, {"r.a is required"});
    expect_input_error([&] { map.required("zzz"); }, {"r.zzz is required"});
    map.finish();
  }
}

TEST(YamlReader, SelfReferencingAliasesDoNotHang) {
  // yaml-cpp builds a cyclic node for this; the readers only walk the schema, never the graph.
  try {
    const YAML::Node node = parse_document("a: &x [*x]\n", "cycle.yaml");
    MapReader map(node, "r");
    expect_input_error([&] { map.required_int("a", 0); }, {"r.a", "got a sequence"});
  } catch (const InputError&) {
  }
}

TEST(YamlReader, DescribeIsShortAndPrintable) {
  const std::string long_text(200, 'x');
  const std::string described = describe(value_of(long_text));
  EXPECT_LT(described.size(), 60U);
  EXPECT_NE(described.find("..."), std::string::npos);
  EXPECT_EQ(describe(value_of("\"a\\x01b\"")), "\"a\\x01b\"");
  EXPECT_EQ(describe(value_of("-3")), "-3");
  EXPECT_EQ(describe(value_of("[1]")), "a sequence");
}

TEST(YamlReader, FormatNumberRoundTrips) {
  EXPECT_EQ(format_number(0.95), "0.95");
  EXPECT_EQ(format_number(25), "25");
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  std::uniform_real_distribution<double> exponent(-30, 30);
  std::uniform_real_distribution<double> mantissa(-1, 1);
  for (int i = 0; i < 2000; ++i) {
    const double value = mantissa(rng) * std::pow(10.0, exponent(rng));
    const double back = to_number(value_of(format_number(value)), "k");
    EXPECT_EQ(back, value) << format_number(value);
  }
}

TEST(YamlReader, WithSourcePrefixesErrors) {
  expect_input_error([] { with_source("file.yaml", []() -> int { throw InputError("model.x is bad"); }); },
                     {"file.yaml: model.x is bad"});
}

}  // namespace
}  // namespace sparsering::yaml
