// Helpers for the config tests: assert that a parse fails with InputError whose message contains
// given pieces, and edit one key of a YAML text (so each failing case differs from a valid file
// in exactly one value).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <sstream>
#include <string>

#include "common/error.hpp"

namespace sparsering::test {

/// Runs `action` and expects an InputError whose message contains every piece of `pieces`.
inline void expect_input_error(const std::function<void()>& action, std::initializer_list<std::string> pieces) {
  try {
    action();
    ADD_FAILURE() << "expected InputError containing \"" << (pieces.size() > 0 ? *pieces.begin() : "") << "\"";
  } catch (const InputError& error) {
    const std::string message = error.what();
    for (const std::string& piece : pieces) {
      EXPECT_NE(message.find(piece), std::string::npos) << "message: " << message << "\nmissing: " << piece;
    }
  }
}

/// Returns `text` with the value of the first line whose key (after indentation) is `key`
/// replaced by `value`. Fails the test if no line has that key.
inline std::string with_value(const std::string& text, const std::string& key, const std::string& value) {
  std::istringstream in(text);
  std::ostringstream out;
  std::string line;
  bool done = false;
  while (std::getline(in, line)) {
    const size_t start = line.find_first_not_of(" -");
    if (!done && start != std::string::npos && line.compare(start, key.size() + 1, key + ":") == 0) {
      line = line.substr(0, start) + key + ": " + value;
      done = true;
    }
    out << line << "\n";
  }
  EXPECT_TRUE(done) << "no key " << key << " in the test text";
  return out.str();
}

/// Returns `text` without the first line whose key (after indentation) is `key`.
inline std::string without_key(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::ostringstream out;
  std::string line;
  bool done = false;
  while (std::getline(in, line)) {
    const size_t start = line.find_first_not_of(' ');
    if (!done && start != std::string::npos && line.compare(start, key.size() + 1, key + ":") == 0) {
      done = true;
      continue;
    }
    out << line << "\n";
  }
  EXPECT_TRUE(done) << "no key " << key << " in the test text";
  return out.str();
}

}  // namespace sparsering::test
