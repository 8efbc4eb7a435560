// Typed, path-aware access to YAML documents, shared by every YAML reader of the project: the
// config parsers (models, GPUs, clusters, plans) and the sparsity priors. Every read names the
// key path in its error (`cluster.inter_node.latency_us must be a number >= 0, got "fast"`),
// mappings reject unknown and duplicate keys (listing the valid ones and the nearest spelling),
// and yaml-cpp syntax errors become InputError with line and column. Only plain scalars are
// numbers or booleans: a quoted "12" is a string. NaN and infinities are rejected everywhere.
// Tested in tests/common/yaml_reader_test.cpp and fuzzed through tests/fuzz/config_parser_fuzz.cpp.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.hpp"

namespace sparsering::yaml {

/// Largest YAML text the config parsers accept, in bytes (configs are a few KiB; this bounds work
/// on hostile input).
inline constexpr size_t kMaxDocumentBytes = size_t{4} << 20;

/// Reads a config file, refusing files larger than kMaxDocumentBytes before reading them.
/// Throws InputError naming the path.
std::string read_config_file(const std::filesystem::path& path);

/// Parses one YAML document. Syntax errors (and nesting deeper than yaml-cpp's guard) throw
/// InputError "<source_name>:<line>:<column>: YAML syntax error: <reason>" (1-based line and
/// column). An empty document yields a null node.
YAML::Node parse_document(const std::string& text, std::string_view source_name);

/// A short, printable description of a node for error messages: a scalar's text (quoted unless
/// it reads as a number, cut at 48 characters, control bytes escaped), or "null", "a sequence",
/// "a mapping".
std::string describe(const YAML::Node& node);

/// Formats a double in the shortest text that reads back to the same value ("0.95", "25", "1e-06").
std::string format_number(double value);

/// Bounds for a floating-point value. Each side is open (strict) or closed.
struct NumberBounds {
  double min = -std::numeric_limits<double>::max();
  bool min_inclusive = true;
  double max = std::numeric_limits<double>::max();
  bool max_inclusive = true;

  /// value > 0
  static NumberBounds positive() { return {0.0, false, std::numeric_limits<double>::max(), true}; }
  /// value >= 0
  static NumberBounds non_negative() { return {0.0, true, std::numeric_limits<double>::max(), true}; }
  /// value in [lo, hi]
  static NumberBounds closed(double lo, double hi) { return {lo, true, hi, true}; }
  /// value in (lo, hi]
  static NumberBounds left_open(double lo, double hi) { return {lo, false, hi, true}; }

  /// True if `value` lies inside the bounds.
  bool contains(double value) const;
  /// The rule as text: "> 0", ">= 0", "in (0, 1]".
  std::string text() const;
};

/// Converts a scalar node to an integer in [min, max]. Throws InputError
/// "<path> must be an integer >= <min>, got <value>" (or "in [min, max]") otherwise.
int64_t to_int(const YAML::Node& node, const std::string& path, int64_t min,
               int64_t max = std::numeric_limits<int64_t>::max());
/// Converts a scalar node to a finite double inside `bounds`; integers are accepted.
double to_number(const YAML::Node& node, const std::string& path, NumberBounds bounds = {});
/// Converts a scalar node to a bool: true/false (also True/TRUE/False/FALSE).
bool to_bool(const YAML::Node& node, const std::string& path);
/// Converts a scalar node to a string; `allow_empty` false rejects "".
std::string to_string(const YAML::Node& node, const std::string& path, bool allow_empty = false);
/// Converts a scalar node to a config name usable as a file stem: 1-128 characters from
/// [A-Za-z0-9._-], not starting with '.' (so it can never walk out of its folder).
std::string to_name(const YAML::Node& node, const std::string& path);
/// Converts a scalar node to one of `choices`; the error lists them.
std::string to_choice(const YAML::Node& node, const std::string& path, std::initializer_list<std::string_view> choices);
/// Checks that `node` is a sequence of at most `max_items` items and returns them in order.
std::vector<YAML::Node> to_sequence(const YAML::Node& node, const std::string& path, size_t max_items);

/// Reader for one YAML mapping at a key path. Each lookup marks its key as valid; finish()
/// then rejects every key that no lookup asked for, so typos are caught. Keys must be distinct
/// scalars. Optional keys whose value is null (`key:` or `key: ~`) count as absent. An empty
/// path stands for the document's top level: its keys' paths are the bare keys ("layers").
class MapReader {
 public:
  /// Throws InputError "<path> must be a mapping, got ..." (with an empty path: "the top level
  /// must be a mapping, got ...") unless `node` is a mapping; also rejects non-scalar and
  /// duplicate keys.
  MapReader(const YAML::Node& node, std::string path);

  /// The reader's own key path, e.g. "cluster.intra_node".
  const std::string& path() const { return path_; }
  /// The key path of a child: "<path>.<key>", or "<key>" when the path is empty.
  std::string key_path(std::string_view key) const;

  /// True if `key` is present with a non-null value (marks it valid).
  bool has(std::string_view key);
  /// The value of a required key; throws "<path>.<key> is required" when absent or null.
  YAML::Node required(std::string_view key);
  /// The value of an optional key, or nullopt when absent or null.
  std::optional<YAML::Node> optional(std::string_view key);

  /// Typed reads of a required key (error when absent) or an optional key (`fallback` when
  /// absent); each converts with the free function of the same type above and names <path>.<key>.
  int64_t required_int(std::string_view key, int64_t min, int64_t max = std::numeric_limits<int64_t>::max());
  /// See required_int.
  int64_t optional_int(std::string_view key, int64_t fallback, int64_t min,
                       int64_t max = std::numeric_limits<int64_t>::max());
  /// See required_int.
  double required_number(std::string_view key, NumberBounds bounds = {});
  /// See required_int.
  double optional_number(std::string_view key, double fallback, NumberBounds bounds = {});
  /// See required_int.
  bool required_bool(std::string_view key);
  /// See required_int.
  bool optional_bool(std::string_view key, bool fallback);
  /// See required_int (non-empty strings).
  std::string required_string(std::string_view key);
  /// See required_int (non-empty strings).
  std::string optional_string(std::string_view key, std::string fallback);
  /// A config name (see to_name).
  std::string required_name(std::string_view key);
  /// See required_int (one of `choices`).
  std::string required_choice(std::string_view key, std::initializer_list<std::string_view> choices);
  /// See required_int (one of `choices`).
  std::string optional_choice(std::string_view key, std::string fallback, std::initializer_list<std::string_view> choices);
  /// A nested mapping (call finish() on it too).
  MapReader required_map(std::string_view key);
  /// A nested mapping if present (call finish() on it too).
  std::optional<MapReader> optional_map(std::string_view key);
  /// The items of a sequence value (at most `max_items`).
  std::vector<YAML::Node> required_sequence(std::string_view key, size_t max_items);

  /// All present keys and their values, in document order (marks nothing).
  const std::vector<std::pair<std::string, YAML::Node>>& entries() const { return entries_; }
  /// Marks `key` valid without reading it (for keys read through entries()).
  void allow(std::string_view key);

  /// Throws InputError "unknown key <path>.<key> (did you mean ...?); valid keys: ..." for the
  /// first key that no lookup asked for.
  void finish() const;

 private:
  const YAML::Node* find(std::string_view key) const;

  std::string path_;
  std::vector<std::pair<std::string, YAML::Node>> entries_;
  std::vector<std::string> valid_keys_;
};

/// Runs `parse` (a callable returning the config) and rethrows every InputError or yaml-cpp
/// exception it throws as InputError prefixed with "<source_name>: ", so messages name the file.
/// Call parse_document outside it: syntax errors already carry the source name.
template <typename Parse>
auto with_source(std::string_view source_name, Parse&& parse) -> decltype(parse());

/// Throws InputError "<source_name>: <message>".
[[noreturn]] void throw_with_source(std::string_view source_name, const char* message);

template <typename Parse>
auto with_source(std::string_view source_name, Parse&& parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const InputError& error) {
    throw_with_source(source_name, error.what());
  } catch (const YAML::Exception& error) {
    throw_with_source(source_name, error.what());
  }
}

}  // namespace sparsering::yaml
