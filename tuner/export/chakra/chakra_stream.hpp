// Chakra's stream framing: an execution-trace file is a sequence of protobuf messages, each
// preceded by its length as a protobuf varint (GlobalMetadata first, then the nodes), as Chakra's
// protolib / ASTRA-sim's feeder read it. Tested in tests/tuner/chakra_export_test.cpp.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <google/protobuf/message_lite.h>

namespace sparsering {

/// Appends `message` to `out`: varint length, then the serialized bytes.
void append_delimited(std::string& out, const google::protobuf::MessageLite& message);

/// Reads the messages of a length-delimited stream one at a time.
class DelimitedReader {
 public:
  /// Reads from `bytes`, which must outlive the reader.
  explicit DelimitedReader(std::string_view bytes) : bytes_(bytes) {}
  /// The bytes of the next message, or std::nullopt at the end of the stream. Throws InputError
  /// (naming the byte offset) for a malformed varint or a length that runs past the end.
  std::optional<std::string_view> next();
  /// Parses the next message into `message`; false at the end of the stream. Throws InputError
  /// when the bytes do not parse.
  bool next(google::protobuf::MessageLite& message);

 private:
  std::string_view bytes_;
  size_t offset_ = 0;
};

}  // namespace sparsering
