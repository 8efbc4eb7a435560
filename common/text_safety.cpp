// UTF-8 validation and terminal escaping (rules in text_safety.hpp). One decoder serves all three
// functions so they can never disagree about what a byte sequence is.
#include "common/text_safety.hpp"

#include <cstdint>

#include "common/error.hpp"

namespace sparsering {
namespace {

/// One decoded step: a code point and its length in bytes, or length 0 for an invalid byte at
/// the position (which then stands alone).
struct Decoded {
  char32_t code_point = 0;
  size_t length = 0;
};

Decoded decode_at(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return {b0, 1};
  size_t length = 0;
  char32_t cp = 0;
  char32_t min = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2, cp = b0 & 0x1Fu, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3, cp = b0 & 0x0Fu, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4, cp = b0 & 0x07u, min = 0x10000;
  } else {
    return {};  // continuation byte, 0xC0/0xC1 (always overlong) or 0xF5.. (beyond U+10FFFF)
  }
  if (i + length > s.size()) return {};
  for (size_t k = 1; k < length; ++k) {
    const unsigned char b = byte(i + k);
    if ((b & 0xC0u) != 0x80u) return {};
    cp = (cp << 6) | (b & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {};
  return {cp, length};
}

bool is_control(char32_t cp) { return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F); }

// Code points that reorder or break displayed text without being control characters.
bool is_invisible_layout(char32_t cp) {
  return (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x200E || cp == 0x200F || cp == 0x061C;
}

/// `prefix` then `value` in upper-case hex, at least `digits` digits, then `suffix`.
std::string hex_escape(const char* prefix, unsigned value, int digits, const char* suffix = "") {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string hex;
  for (; value != 0 || static_cast<int>(hex.size()) < digits; value >>= 4) hex.insert(hex.begin(), kHex[value & 0xFu]);
  return prefix + hex + suffix;
}

}  // namespace

bool is_valid_utf8(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    const Decoded d = decode_at(bytes, i);
    if (d.length == 0) return false;
    i += d.length;
  }
  return true;
}

void require_safe_name(std::string_view value, std::string_view field) {
  for (size_t i = 0; i < value.size();) {
    const Decoded d = decode_at(value, i);
    if (d.length == 0) {
      throw InputError(str(field, " is not valid UTF-8 (byte ", i, "): '", escape_for_terminal(value), "'"));
    }
    if (is_control(d.code_point)) {
      throw InputError(
          str(field, " holds a control character (byte ", i, "): '", escape_for_terminal(value), "'"));
    }
    i += d.length;
  }
}

std::string escape_for_terminal(std::string_view text, bool keep_line_breaks) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const Decoded d = decode_at(text, i);
    if (d.length == 0) {
      out += hex_escape("\\x", static_cast<unsigned char>(text[i]), 2);
      ++i;
      continue;
    }
    const char32_t cp = d.code_point;
    if (keep_line_breaks && (cp == '\n' || cp == '\t')) {
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7F) {
      out += hex_escape("\\x", static_cast<unsigned>(cp), 2);
    } else if (is_control(cp)) {
      out += hex_escape("\\u{", static_cast<unsigned>(cp), 2, "}");
    } else if (is_invisible_layout(cp)) {
      out += hex_escape("\\u{", static_cast<unsigned>(cp), 4, "}");
    } else {
      out.append(text.substr(i, d.length));
    }
    i += d.length;
  }
  return out;
}

}  // namespace sparsering
