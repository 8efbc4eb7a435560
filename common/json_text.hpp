// JSON documents as text that never fails on a string that is not valid UTF-8 (a name read from
// a hostile file): invalid bytes become U+FFFD instead of an exception. Every JSON the CLI prints
// or writes goes through here. Tested in tests/common/text_safety_test.cpp.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sparsering {

/// `doc` serialized; `indent` < 0 is compact, otherwise spaces per level. Invalid UTF-8 in any
/// string is replaced by U+FFFD; control characters are escaped as JSON requires.
inline std::string dump_json(const nlohmann::json& doc, int indent = -1) {
  return doc.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace sparsering
