#include "tuner/export/chakra/chakra_stream.hpp"

#include <cstdint>

#include "common/error.hpp"

namespace sparsering {

void append_delimited(std::string& out, const google::protobuf::MessageLite& message) {
  const std::string body = message.SerializeAsString();
  auto length = static_cast<uint64_t>(body.size());
  do {
    auto byte = static_cast<uint8_t>(length & 0x7fU);
    length >>= 7U;
    if (length != 0) byte = static_cast<uint8_t>(byte | 0x80U);
    out.push_back(static_cast<char>(byte));
  } while (length != 0);
  out += body;
}

std::optional<std::string_view> DelimitedReader::next() {
  if (offset_ == bytes_.size()) return std::nullopt;
  const size_t start = offset_;
  uint64_t length = 0;
  for (unsigned shift = 0;; shift += 7) {
    require(offset_ < bytes_.size(), "Chakra stream: truncated length at byte ", start);
    require(shift < 35, "Chakra stream: length varint longer than 5 bytes at byte ", start);
    const auto byte = static_cast<uint8_t>(bytes_[offset_++]);
    length |= uint64_t{byte & 0x7fU} << shift;
    if ((byte & 0x80U) == 0) break;
  }
  require(length <= bytes_.size() - offset_, "Chakra stream: message of ", length, " bytes at byte ", start,
          " runs past the end (", bytes_.size() - offset_, " bytes left)");
  const std::string_view body = bytes_.substr(offset_, static_cast<size_t>(length));
  offset_ += static_cast<size_t>(length);
  return body;
}

bool DelimitedReader::next(google::protobuf::MessageLite& message) {
  const size_t start = offset_;
  const auto body = next();
  if (!body) return false;
  require(message.ParseFromArray(body->data(), static_cast<int>(body->size())), "Chakra stream: the message at byte ",
          start, " does not parse as ", message.GetTypeName());
  return true;
}

}  // namespace sparsering
