// tuner/export/chakra/et_def.proto against upstream's schema, and the stream framing.
// The table below re-states mlcommons/chakra schema/protobuf/et_def.proto at commit
// 21585d8f2d65603d791d2121e3d4632351120262 (Chakra 1.0.0): every message with its fields (name,
// number, type, label) and every enum with its values. The generated descriptors must match it
// exactly, in both directions, so that a field or enum value that upstream does not have (or that
// is renumbered) fails here. When upstream's schema changes, update the table and the proto
// together and name the new commit.
#include <gtest/gtest.h>

#include <google/protobuf/descriptor.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "tuner/export/chakra/chakra_stream.hpp"
#include "tuner/export/chakra/et_def.pb.h"

namespace sparsering {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;

struct FieldSpec {
  std::string name;
  int number;
  std::string type;  ///< scalar type name, or the message / enum type's name
  bool repeated;
};

std::string type_name(const FieldDescriptor& field) {
  if (field.type() == FieldDescriptor::TYPE_MESSAGE) return field.message_type()->name();
  if (field.type() == FieldDescriptor::TYPE_ENUM) return field.enum_type()->name();
  return field.type_name();
}

std::vector<FieldSpec> list_of(const std::string& scalar) { return {{"values", 1, scalar, true}}; }

// Upstream's messages at 21585d8f2d65603d791d2121e3d4632351120262.
std::map<std::string, std::vector<FieldSpec>> upstream_messages() {
  std::map<std::string, std::vector<FieldSpec>> m;
  m["AttributeProto"] = {
      {"name", 1, "string", false},           {"doc_string", 2, "string", false},
      {"double_val", 3, "double", false},     {"double_list", 4, "DoubleList", false},
      {"float_val", 5, "float", false},       {"float_list", 6, "FloatList", false},
      {"int32_val", 7, "int32", false},       {"int32_list", 8, "Int32List", false},
      {"int64_val", 9, "int64", false},       {"int64_list", 10, "Int64List", false},
      {"uint32_val", 11, "uint32", false},    {"uint32_list", 12, "Uint32List", false},
      {"uint64_val", 13, "uint64", false},    {"uint64_list", 14, "Uint64List", false},
      {"sint32_val", 15, "sint32", false},    {"sint32_list", 16, "Sint32List", false},
      {"sint64_val", 17, "sint64", false},    {"sint64_list", 18, "Sint64List", false},
      {"fixed32_val", 19, "fixed32", false},  {"fixed32_list", 20, "Fixed32List", false},
      {"fixed64_val", 21, "fixed64", false},  {"fixed64_list", 22, "Fixed64List", false},
      {"sfixed32_val", 23, "sfixed32", false}, {"sfixed32_list", 24, "Sfixed32List", false},
      {"sfixed64_val", 25, "sfixed64", false}, {"sfixed64_list", 26, "Sfixed64List", false},
      {"bool_val", 27, "bool", false},        {"bool_list", 28, "BoolList", false},
      {"string_val", 29, "string", false},    {"string_list", 30, "StringList", false},
      {"bytes_val", 31, "bytes", false},      {"bytes_list", 32, "BytesList", false}};
  m["DoubleList"] = list_of("double");
  m["FloatList"] = list_of("float");
  m["Int32List"] = list_of("int32");
  m["Int64List"] = list_of("int64");
  m["Uint32List"] = list_of("uint32");
  m["Uint64List"] = list_of("uint64");
  m["Sint32List"] = list_of("sint32");
  m["Sint64List"] = list_of("sint64");
  m["Fixed32List"] = list_of("fixed32");
  m["Fixed64List"] = list_of("fixed64");
  m["Sfixed32List"] = list_of("sfixed32");
  m["Sfixed64List"] = list_of("sfixed64");
  m["BoolList"] = list_of("bool");
  m["StringList"] = list_of("string");
  m["BytesList"] = list_of("bytes");
  m["GlobalMetadata"] = {{"version", 1, "string", false}, {"attr", 2, "AttributeProto", true}};
  m["Node"] = {{"id", 1, "uint64", false},
               {"name", 2, "string", false},
               {"type", 3, "NodeType", false},
               {"ctrl_deps", 4, "uint64", true},
               {"data_deps", 5, "uint64", true},
               {"start_time_micros", 6, "uint64", false},
               {"duration_micros", 7, "uint64", false},
               {"inputs", 8, "IOInfo", false},
               {"outputs", 9, "IOInfo", false},
               {"attr", 10, "AttributeProto", true}};
  m["IOInfo"] = {{"values", 1, "string", false}, {"shapes", 2, "string", false}, {"types", 3, "string", false}};
  m["Tensor"] = {{"tensor_id", 1, "uint64", false}, {"storage_id", 2, "uint64", false},
                 {"offset", 3, "uint64", false},    {"num_elem", 4, "uint64", false},
                 {"elem_bytes", 5, "uint64", false}, {"device", 6, "string", false}};
  return m;
}

std::map<std::string, std::vector<std::pair<std::string, int>>> upstream_enums() {
  return {{"NodeType",
           {{"INVALID_NODE", 0},
            {"METADATA_NODE", 1},
            {"MEM_LOAD_NODE", 2},
            {"MEM_STORE_NODE", 3},
            {"COMP_NODE", 4},
            {"COMM_SEND_NODE", 5},
            {"COMM_RECV_NODE", 6},
            {"COMM_COLL_NODE", 7}}},
          {"CollectiveCommType",
           {{"ALL_REDUCE", 0},
            {"REDUCE", 1},
            {"ALL_GATHER", 2},
            {"GATHER", 3},
            {"SCATTER", 4},
            {"BROADCAST", 5},
            {"ALL_TO_ALL", 6},
            {"REDUCE_SCATTER", 7},
            {"REDUCE_SCATTER_BLOCK", 8},
            {"BARRIER", 9}}}};
}

const google::protobuf::FileDescriptor& schema_file() {
  return *ChakraProtoMsg::Node::descriptor()->file();
}

TEST(ChakraSchema, PackageAndSyntaxAreUpstreams) {
  EXPECT_EQ(schema_file().package(), "ChakraProtoMsg");
  EXPECT_EQ(schema_file().syntax(), google::protobuf::FileDescriptor::SYNTAX_PROTO3);
}

TEST(ChakraSchema, MessagesAndFieldsMatchUpstreamExactly) {
  const auto expected = upstream_messages();
  const auto& file = schema_file();
  ASSERT_EQ(file.message_type_count(), static_cast<int>(expected.size()));
  for (int i = 0; i < file.message_type_count(); ++i) {
    const Descriptor& message = *file.message_type(i);
    const auto it = expected.find(message.name());
    ASSERT_NE(it, expected.end()) << "message " << message.name() << " is not in upstream's schema";
    ASSERT_EQ(message.field_count(), static_cast<int>(it->second.size())) << message.name();
    for (const FieldSpec& spec : it->second) {
      const FieldDescriptor* field = message.FindFieldByName(spec.name);
      ASSERT_NE(field, nullptr) << message.name() << "." << spec.name << " is missing";
      EXPECT_EQ(field->number(), spec.number) << message.name() << "." << spec.name;
      EXPECT_EQ(type_name(*field), spec.type) << message.name() << "." << spec.name;
      EXPECT_EQ(field->is_repeated(), spec.repeated) << message.name() << "." << spec.name;
    }
  }
  // AttributeProto's values form one oneof, fields 3 .. 32.
  const Descriptor& attr = *ChakraProtoMsg::AttributeProto::descriptor();
  ASSERT_EQ(attr.oneof_decl_count(), 1);
  EXPECT_EQ(attr.oneof_decl(0)->name(), "value");
  EXPECT_EQ(attr.oneof_decl(0)->field_count(), 30);
}

TEST(ChakraSchema, EnumsMatchUpstreamExactly) {
  const auto expected = upstream_enums();
  const auto& file = schema_file();
  ASSERT_EQ(file.enum_type_count(), static_cast<int>(expected.size()));
  for (int i = 0; i < file.enum_type_count(); ++i) {
    const EnumDescriptor& e = *file.enum_type(i);
    const auto it = expected.find(e.name());
    ASSERT_NE(it, expected.end()) << "enum " << e.name() << " is not in upstream's schema";
    ASSERT_EQ(e.value_count(), static_cast<int>(it->second.size())) << e.name() << " has values upstream lacks";
    for (const auto& [name, number] : it->second) {
      const auto* value = e.FindValueByName(name);
      ASSERT_NE(value, nullptr) << e.name() << "." << name;
      EXPECT_EQ(value->number(), number) << e.name() << "." << name;
    }
  }
}

TEST(ChakraStream, RoundTripAndTruncation) {
  ChakraProtoMsg::GlobalMetadata metadata;
  metadata.set_version("1.0.0");
  ChakraProtoMsg::Node node;
  node.set_id(7);
  node.set_name(std::string(300, 'x'));  // a length that needs a two-byte varint
  node.set_type(ChakraProtoMsg::COMP_NODE);
  std::ostringstream out;
  write_delimited(out, metadata);
  write_delimited(out, node);
  const std::string bytes = out.str();
  // Chakra's framing: a varint length before each message.
  EXPECT_EQ(static_cast<size_t>(static_cast<unsigned char>(bytes[0])), metadata.ByteSizeLong());

  DelimitedReader reader(bytes);
  ChakraProtoMsg::GlobalMetadata read_metadata;
  ChakraProtoMsg::Node read_node;
  ASSERT_TRUE(reader.next(read_metadata));
  ASSERT_TRUE(reader.next(read_node));
  EXPECT_EQ(read_metadata.version(), "1.0.0");
  EXPECT_EQ(read_node.id(), 7u);
  EXPECT_EQ(read_node.name().size(), 300u);
  EXPECT_FALSE(reader.next(read_node));

  const std::string truncated = bytes.substr(0, bytes.size() - 5);
  DelimitedReader short_reader(truncated);
  ASSERT_TRUE(short_reader.next(read_metadata));
  try {
    short_reader.next(read_node);
    ADD_FAILURE() << "a truncated message must be refused";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("truncated"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace sparsering
