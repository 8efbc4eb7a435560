// Chakra's stream framing: an execution-trace file is a sequence of protobuf messages, each
// preceded by its length as a protobuf varint (GlobalMetadata first, then the nodes), as Chakra's
// protolib / ASTRA-sim's feeder read it. Written and read with protobuf's own delimited-message
// utilities (google/protobuf/util/delimited_message_util.h). Tested in
// tests/tuner/chakra_schema_test.cpp and tests/tuner/chakra_export_test.cpp.
#pragma once

#include <ostream>
#include <string_view>

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/message_lite.h>

namespace sparsering {

/// Writes `message` to `out`: varint length, then the serialized bytes. Throws InputError when the
/// message cannot be serialized or the stream fails.
void write_delimited(std::ostream& out, const google::protobuf::MessageLite& message);

/// Reads the messages of a length-delimited stream one at a time.
class DelimitedReader {
 public:
  /// Reads from `bytes`, which must outlive the reader.
  explicit DelimitedReader(std::string_view bytes);
  /// Parses the next message into `message` (cleared first); false at the end of the stream. Throws InputError
  /// (naming the byte offset) for a truncated or malformed message.
  bool next(google::protobuf::MessageLite& message);

 private:
  google::protobuf::io::ArrayInputStream stream_;
  size_t size_;
};

}  // namespace sparsering
