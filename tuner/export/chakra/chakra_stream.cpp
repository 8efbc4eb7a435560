// Thin wrappers over protobuf's delimited-message utilities, so that the exporter and its tests
// share one framing and report a malformed stream as bad input with its byte offset.
#include "tuner/export/chakra/chakra_stream.hpp"

#include <google/protobuf/util/delimited_message_util.h>

#include <climits>

#include "common/error.hpp"

namespace sparsering {

void write_delimited(std::ostream& out, const google::protobuf::MessageLite& message) {
  require(google::protobuf::util::SerializeDelimitedToOstream(message, &out), "Chakra stream: cannot write a ",
          message.GetTypeName(), " message");
}

DelimitedReader::DelimitedReader(std::string_view bytes)
    : stream_(bytes.data(), static_cast<int>(bytes.size())), size_(bytes.size()) {
  // ArrayInputStream counts in int; a trace file above 2 GiB would be cut short silently.
  require(bytes.size() <= static_cast<size_t>(INT_MAX), "Chakra stream: ", bytes.size(),
          " bytes is more than one stream reader handles (2 GiB)");
}

bool DelimitedReader::next(google::protobuf::MessageLite& message) {
  const auto start = static_cast<size_t>(stream_.ByteCount());
  if (start == size_) return false;
  bool clean_eof = false;
  // The utility merges into the message, so a reused message would keep the previous one's
  // repeated fields.
  message.Clear();
  const bool parsed = google::protobuf::util::ParseDelimitedFromZeroCopyStream(&message, &stream_, &clean_eof);
  if (!parsed && clean_eof) return false;
  require(parsed, "Chakra stream: the message at byte ", start, " is truncated or does not parse as ",
          message.GetTypeName());
  return true;
}

}  // namespace sparsering
