// Typed YAML access with key paths. Numbers are parsed with std::from_chars on the scalar text
// rather than yaml-cpp's stream conversions, which accept trailing junk in some versions and
// cannot report overflow precisely.
#include "common/yaml_reader.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <set>
#include <system_error>

#include "common/input_file.hpp"
#include "common/error.hpp"
#include "common/text_safety.hpp"

namespace sparsering::yaml {
namespace {

constexpr size_t kMaxShownChars = 48;
constexpr size_t kMaxKeyChars = 256;

/// Printable, shortened copy of a scalar for messages.
std::string printable(std::string_view text) {
  std::string out;
  const size_t shown = std::min(text.size(), kMaxShownChars);
  for (size_t i = 0; i < shown; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 || byte == 0x7f) {
      static constexpr std::array<char, 16> hex{'0', '1', '2', '3', '4', '5', '6', '7',
                                                '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
      out += "\\x";
      out += hex[byte >> 4U];
      out += hex[byte & 0xfU];
    } else {
      out += static_cast<char>(byte);
    }
  }
  if (text.size() > shown) out += "...";
  return out;
}

/// Parses the whole text as an integer (optional sign, decimal digits only).
std::optional<int64_t> parse_int(std::string_view text, bool* overflow) {
  *overflow = false;
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return std::nullopt;
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (end != text.data() + text.size()) return std::nullopt;
  if (error == std::errc::result_out_of_range) {
    *overflow = true;
    return std::nullopt;
  }
  if (error != std::errc()) return std::nullopt;
  return value;
}

/// Parses the whole text as a finite decimal floating-point number.
std::optional<double> parse_double(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return std::nullopt;
  // from_chars also reads "inf" and "nan"; YAML spells those .inf/.nan and we reject both.
  const char first = text.front() == '-' && text.size() > 1 ? text[1] : text.front();
  if (first != '.' && (first < '0' || first > '9')) return std::nullopt;
  double value = 0.0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

bool is_plain_scalar(const YAML::Node& node) { return node.IsScalar() && node.Tag() != "!"; }

size_t edit_distance(std::string_view a, std::string_view b) {
  a = a.substr(0, kMaxKeyChars);
  b = b.substr(0, kMaxKeyChars);
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0U : 1U)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string int_rule(int64_t min, int64_t max) {
  if (max == std::numeric_limits<int64_t>::max()) return str(">= ", min);
  return str("in [", min, ", ", max, "]");
}

}  // namespace

std::string read_config_file(const std::filesystem::path& path) {
  // Only a regular file of at most kMaxDocumentBytes is read: a FIFO, a device or a huge file fails
  // before any byte is read (common/input_file.hpp).
  return read_file(path, static_cast<int64_t>(kMaxDocumentBytes));
}

YAML::Node parse_document(const std::string& text, std::string_view source_name) {
  require(text.size() <= kMaxDocumentBytes, source_name, ": file is ", text.size(), " bytes, more than the ",
          kMaxDocumentBytes, " a config may have");
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& error) {
    // Mark is 0-based; -1 when yaml-cpp has no position.
    const int line = error.mark.line >= 0 ? error.mark.line + 1 : 0;
    const int column = error.mark.column >= 0 ? error.mark.column + 1 : 0;
    throw InputError(str(source_name, ":", line, ":", column, ": YAML syntax error: ", printable(error.msg)));
  }
}

std::string describe(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "null";
  if (node.IsSequence()) return "a sequence";
  if (node.IsMap()) return "a mapping";
  const std::string& text = node.Scalar();
  bool overflow = false;
  if (is_plain_scalar(node) && (parse_int(text, &overflow) || parse_double(text))) return printable(text);
  return "\"" + printable(text) + "\"";
}

std::string format_number(double value) {
  std::array<char, 64> buffer{};
  const auto [end, error] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  if (error != std::errc()) return "nan";
  return std::string(buffer.data(), end);
}

bool NumberBounds::contains(double value) const {
  const bool above = min_inclusive ? value >= min : value > min;
  const bool below = max_inclusive ? value <= max : value < max;
  return above && below;
}

std::string NumberBounds::text() const {
  const bool no_max = max == std::numeric_limits<double>::max();
  const bool no_min = min == -std::numeric_limits<double>::max();
  if (no_max && no_min) return "finite";
  if (no_max) return str(min_inclusive ? ">= " : "> ", format_number(min));
  if (no_min) return str(max_inclusive ? "<= " : "< ", format_number(max));
  return str("in ", min_inclusive ? "[" : "(", format_number(min), ", ", format_number(max), max_inclusive ? "]" : ")");
}

int64_t to_int(const YAML::Node& node, const std::string& path, int64_t min, int64_t max) {
  const std::string rule = int_rule(min, max);
  if (!is_plain_scalar(node)) throw InputError(str(path, " must be an integer ", rule, ", got ", describe(node)));
  bool overflow = false;
  const std::optional<int64_t> value = parse_int(node.Scalar(), &overflow);
  if (!value) {
    throw InputError(str(path, " must be an integer ", rule, ", got ", describe(node),
                         overflow ? " (out of the 64-bit range)" : ""));
  }
  require(*value >= min && *value <= max, path, " must be an integer ", rule, ", got ", *value);
  return *value;
}

double to_number(const YAML::Node& node, const std::string& path, NumberBounds bounds) {
  const std::string rule = bounds.text() == "finite" ? "" : " " + bounds.text();
  if (!is_plain_scalar(node)) throw InputError(str(path, " must be a finite number", rule, ", got ", describe(node)));
  const std::optional<double> value = parse_double(node.Scalar());
  if (!value) throw InputError(str(path, " must be a finite number", rule, ", got ", describe(node)));
  require(bounds.contains(*value), path, " must be", rule, ", got ", printable(node.Scalar()));
  return *value;
}

bool to_bool(const YAML::Node& node, const std::string& path) {
  if (is_plain_scalar(node)) {
    const std::string& text = node.Scalar();
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
  }
  throw InputError(str(path, " must be true or false, got ", describe(node)));
}

std::string to_string(const YAML::Node& node, const std::string& path, bool allow_empty) {
  if (!node.IsScalar()) throw InputError(str(path, " must be a string, got ", describe(node)));
  require(allow_empty || !node.Scalar().empty(), path, " must not be empty");
  // Every string a config holds may be printed or written to JSON later: invalid UTF-8 stops here.
  require(is_valid_utf8(node.Scalar()), path, " is not valid UTF-8: \"", escape_for_terminal(node.Scalar()), "\"");
  return node.Scalar();
}

std::string to_name(const YAML::Node& node, const std::string& path) {
  const std::string text = to_string(node, path);
  const bool valid_chars = std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
  require(valid_chars && text.size() <= 128 && text.front() != '.', path,
          " must be a name of 1-128 letters, digits, '.', '_' or '-' not starting with '.', got ", describe(node));
  return text;
}

std::string to_choice(const YAML::Node& node, const std::string& path, std::initializer_list<std::string_view> choices) {
  std::string list;
  for (const std::string_view choice : choices) list += (list.empty() ? "" : ", ") + std::string(choice);
  if (node.IsScalar()) {
    for (const std::string_view choice : choices) {
      if (node.Scalar() == choice) return node.Scalar();
    }
  }
  throw InputError(str(path, " must be one of ", list, "; got ", describe(node)));
}

std::vector<YAML::Node> to_sequence(const YAML::Node& node, const std::string& path, size_t max_items) {
  require(node.IsSequence(), path, " must be a sequence, got ", describe(node));
  require(node.size() <= max_items, path, " has ", node.size(), " items, more than the ", max_items, " allowed");
  std::vector<YAML::Node> items;
  items.reserve(node.size());
  for (const YAML::Node& item : node) items.push_back(item);
  return items;
}

MapReader::MapReader(const YAML::Node& node, std::string path) : path_(std::move(path)) {
  const std::string what = path_.empty() ? std::string("the top level") : path_;
  require(node.IsMap(), what, " must be a mapping, got ", describe(node));
  std::set<std::string, std::less<>> seen;
  for (const auto& entry : node) {
    require(entry.first.IsScalar(), what, " has a key that is ", describe(entry.first), "; keys must be plain names");
    const std::string& key = entry.first.Scalar();
    require(seen.insert(key).second, key_path(key), " appears more than once");
    entries_.emplace_back(key, entry.second);
  }
}

std::string MapReader::key_path(std::string_view key) const {
  if (path_.empty()) return printable(key);
  return str(path_, ".", printable(key));
}

const YAML::Node* MapReader::find(std::string_view key) const {
  for (const auto& [name, value] : entries_) {
    if (name == key) return &value;
  }
  return nullptr;
}

void MapReader::allow(std::string_view key) {
  if (std::find(valid_keys_.begin(), valid_keys_.end(), key) == valid_keys_.end()) valid_keys_.emplace_back(key);
}

bool MapReader::has(std::string_view key) {
  allow(key);
  const YAML::Node* value = find(key);
  return value != nullptr && !value->IsNull();
}

YAML::Node MapReader::required(std::string_view key) {
  allow(key);
  const YAML::Node* value = find(key);
  if (value != nullptr && !value->IsNull()) return *value;
  // A missing key is often a misspelt one: point at the present key closest to it.
  std::string hint;
  constexpr size_t kMaxHintEntries = 256;  // bounds the edit-distance work on hostile mappings
  for (size_t i = 0; i < entries_.size() && entries_.size() <= kMaxHintEntries; ++i) {
    const std::string& present = entries_[i].first;
    const bool known = std::find(valid_keys_.begin(), valid_keys_.end(), present) != valid_keys_.end();
    if (!known && edit_distance(present, key) <= 2) {
      hint = str(" (found unknown key ", key_path(present), ": did you mean ", key, "?)");
      break;
    }
  }
  throw InputError(str(key_path(key), " is required", hint));
}

std::optional<YAML::Node> MapReader::optional(std::string_view key) {
  allow(key);
  const YAML::Node* value = find(key);
  if (value == nullptr || value->IsNull()) return std::nullopt;
  return *value;
}

int64_t MapReader::required_int(std::string_view key, int64_t min, int64_t max) {
  return to_int(required(key), key_path(key), min, max);
}

int64_t MapReader::optional_int(std::string_view key, int64_t fallback, int64_t min, int64_t max) {
  const auto value = optional(key);
  return value ? to_int(*value, key_path(key), min, max) : fallback;
}

double MapReader::required_number(std::string_view key, NumberBounds bounds) {
  return to_number(required(key), key_path(key), bounds);
}

double MapReader::optional_number(std::string_view key, double fallback, NumberBounds bounds) {
  const auto value = optional(key);
  return value ? to_number(*value, key_path(key), bounds) : fallback;
}

bool MapReader::required_bool(std::string_view key) { return to_bool(required(key), key_path(key)); }

bool MapReader::optional_bool(std::string_view key, bool fallback) {
  const auto value = optional(key);
  return value ? to_bool(*value, key_path(key)) : fallback;
}

std::string MapReader::required_string(std::string_view key) { return to_string(required(key), key_path(key)); }

std::string MapReader::optional_string(std::string_view key, std::string fallback) {
  const auto value = optional(key);
  return value ? to_string(*value, key_path(key)) : fallback;
}

std::string MapReader::required_name(std::string_view key) { return to_name(required(key), key_path(key)); }

std::string MapReader::required_choice(std::string_view key, std::initializer_list<std::string_view> choices) {
  return to_choice(required(key), key_path(key), choices);
}

std::string MapReader::optional_choice(std::string_view key, std::string fallback,
                                       std::initializer_list<std::string_view> choices) {
  const auto value = optional(key);
  return value ? to_choice(*value, key_path(key), choices) : fallback;
}

MapReader MapReader::required_map(std::string_view key) { return MapReader(required(key), key_path(key)); }

std::optional<MapReader> MapReader::optional_map(std::string_view key) {
  const auto value = optional(key);
  if (!value) return std::nullopt;
  return MapReader(*value, key_path(key));
}

std::vector<YAML::Node> MapReader::required_sequence(std::string_view key, size_t max_items) {
  return to_sequence(required(key), key_path(key), max_items);
}

void MapReader::finish() const {
  for (const auto& entry : entries_) {
    const std::string& key = entry.first;
    if (std::find(valid_keys_.begin(), valid_keys_.end(), key) != valid_keys_.end()) continue;
    std::string valid;
    std::string nearest;
    size_t nearest_distance = 3;  // suggest only spellings within two edits
    for (const std::string& candidate : valid_keys_) {
      valid += (valid.empty() ? "" : ", ") + candidate;
      const size_t distance = edit_distance(key, candidate);
      if (distance < nearest_distance) {
        nearest_distance = distance;
        nearest = candidate;
      }
    }
    throw InputError(str("unknown key ", key_path(key), nearest.empty() ? "" : str(" (did you mean ", nearest, "?)"),
                         "; valid keys: ", valid.empty() ? "none" : valid));
  }
}

void throw_with_source(std::string_view source_name, const char* message) {
  throw InputError(str(source_name, ": ", message));
}

}  // namespace sparsering::yaml
