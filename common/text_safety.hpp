// Text a user controls (names in configs and traces, paths, values echoed in messages) checked or
// made harmless before it reaches a terminal: a strict UTF-8 validator, a check for names (valid
// UTF-8 without control characters) and a printable escape of control characters, terminal
// escape sequences and invalid bytes. Tested in tests/common/text_safety_test.cpp.
#pragma once

#include <string>
#include <string_view>

namespace sparsering {

/// True when `bytes` is well-formed UTF-8 (RFC 3629): no overlong forms, no UTF-16 surrogates
/// (U+D800..U+DFFF), nothing above U+10FFFF, no truncated sequence.
bool is_valid_utf8(std::string_view bytes);

/// Throws InputError naming `field` when `value` is not valid UTF-8 or holds a control
/// character (C0 U+0000..U+001F, DEL U+007F, C1 U+0080..U+009F). The message shows the value
/// escaped (escape_for_terminal) and the byte offset of the first problem.
void require_safe_name(std::string_view value, std::string_view field);

/// `text` made safe to print on a terminal: printable UTF-8 passes unchanged; control
/// characters become \n, \t, \r or \xHH (C0 and DEL) and \u{HH} (C1); Unicode direction
/// overrides and line/paragraph separators become \u{HHHH}; every byte that is not part of
/// valid UTF-8 becomes \xHH. With `keep_line_breaks`, '\n' (and '\t') pass unchanged, for
/// multi-line messages. For display only: the escape is not meant to be reversed.
std::string escape_for_terminal(std::string_view text, bool keep_line_breaks = false);

}  // namespace sparsering
