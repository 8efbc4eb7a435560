#include "tuner/export/chakra/step_durations.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "tuner/export/plan_groups.hpp"

namespace sparsering {
namespace {

// 2^53 ns (about 104 days): every duration is an exact double and sums stay far from overflow.
constexpr double kMaxDurationNs = 9007199254740992.0;
constexpr size_t kMaxLayers = 4096;

int64_t read_ns(const nlohmann::json& value, std::string_view source, const std::string& where) {
  require(value.is_number(), source, ": ", where, " must be a number of ns, got ", value.type_name());
  const double ns = value.get<double>();
  require(std::isfinite(ns) && ns >= 0.0 && ns <= kMaxDurationNs, source, ": ", where,
          " must be a duration in [0, 2^53] ns, got ", ns);
  return std::llround(ns);
}

std::vector<int64_t> read_row(const nlohmann::json& row, std::string_view source, const std::string& where,
                              int64_t steps) {
  require(row.is_array() && static_cast<int64_t>(row.size()) == steps, source, ": ", where, " must be an array of ",
          steps, " step durations (ns), got ",
          row.is_array() ? str(row.size(), " entries") : std::string(row.type_name()));
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(steps));
  for (int64_t t = 0; t < steps; ++t) out.push_back(read_ns(row[static_cast<size_t>(t)], source, str(where, "[", t, "]")));
  return out;
}

StepMatrix read_matrix(const nlohmann::json& doc, const std::string& key, std::string_view source,
                       const PlanConfig& plan) {
  const nlohmann::json& rows = doc.at(key);
  const int64_t world = plan.world_size();
  const int64_t steps = plan.context_parallel;
  require(rows.is_array(), source, ": ", key, " must be an array of rows (one per rank), got ", rows.type_name());
  const auto count = static_cast<int64_t>(rows.size());
  require(count == world || count == steps, source, ": ", key, " has ", count, " rows; it needs one per global rank (",
          world, ") or one per ring position (", steps, ")");
  StepMatrix matrix;
  for (int64_t r = 0; r < count; ++r) {
    matrix.push_back(read_row(rows[static_cast<size_t>(r)], source, str(key, "[", r, "]"), steps));
  }
  if (count == world) return matrix;
  // One row per ring position: every ring's rank at position p gets row p.
  StepMatrix per_rank(static_cast<size_t>(world));
  const std::vector<RankSlot> slots = rank_slots(plan);
  for (int64_t g = 0; g < world; ++g) {
    per_rank[static_cast<size_t>(g)] = matrix[static_cast<size_t>(slots[static_cast<size_t>(g)].position)];
  }
  return per_rank;
}

StepDurations parse_step_schema(const nlohmann::json& doc, std::string_view source, const PlanConfig& plan) {
  if (doc.contains("unit")) {
    require(doc["unit"] == "ns", source, ": unit must be \"ns\", got ", doc["unit"].dump());
  }
  require(doc.contains("forward"), source, ": missing key \"forward\" ([[ns per step] per rank])");
  StepDurations durations;
  durations.forward_ns.push_back(read_matrix(doc, "forward", source, plan));
  if (doc.contains("backward") && !doc["backward"].is_null()) {
    durations.backward_ns.push_back(read_matrix(doc, "backward", source, plan));
  }
  return durations;
}

const nlohmann::json& member(const nlohmann::json& object, const char* key, std::string_view source,
                             const std::string& where) {
  require(object.is_object() && object.contains(key), source, ": ", where, " has no key \"", key, "\"");
  return object[key];
}

int64_t member_int(const nlohmann::json& object, const char* key, std::string_view source, const std::string& where) {
  const nlohmann::json& value = member(object, key, source, where);
  require(value.is_number_integer(), source, ": ", where, ".", key, " must be an integer, got ", value.dump());
  return value.get<int64_t>();
}

StepDurations parse_simulation(const nlohmann::json& doc, std::string_view source, const PlanConfig& plan) {
  const nlohmann::json& parallel = member(doc, "parallel", source, "the simulation result");
  const int64_t cp = member_int(parallel, "context_parallel", source, "parallel");
  const int64_t hp = member_int(parallel, "head_parallel", source, "parallel");
  const int64_t dp = member_int(parallel, "data_parallel", source, "parallel");
  require(cp == plan.context_parallel && hp == plan.head_parallel && dp == plan.data_parallel, source,
          ": the simulation is of context_parallel x head_parallel x data_parallel = ", cp, " x ", hp, " x ", dp,
          " but the plan has ", plan.context_parallel, " x ", plan.head_parallel, " x ", plan.data_parallel);
  require(doc.contains("rings"), source, ": the simulation result has no per-step ring records; write them with ",
          "`sparsering simulate --out DIR` and pass DIR/result.json");
  const nlohmann::json& classes = member(doc, "ring_classes", source, "the simulation result");
  const nlohmann::json& rings = doc["rings"];
  require(classes.is_array() && rings.is_array(), source, ": ring_classes and rings must be arrays");
  const int64_t world = plan.world_size();
  const int64_t steps = plan.context_parallel;
  std::vector<StepMatrix> passes[2];       // [backward][layer]
  std::vector<std::vector<bool>> filled[2];  // [backward][layer][rank]
  for (size_t i = 0; i < rings.size(); ++i) {
    const std::string where = str("rings[", i, "]");
    const nlohmann::json& pass = rings[i];
    const int64_t layer = member_int(pass, "layer", source, where);
    require(layer >= 0 && static_cast<size_t>(layer) < kMaxLayers, source, ": ", where, ".layer ", layer,
            " is outside [0, ", kMaxLayers, ")");
    const nlohmann::json& direction = member(pass, "direction", source, where);
    require(direction == "forward" || direction == "backward", source, ": ", where,
            ".direction must be \"forward\" or \"backward\", got ", direction.dump());
    const int b = direction == "backward" ? 1 : 0;
    const int64_t cls = member_int(pass, "ring_class", source, where);
    require(cls >= 0 && static_cast<size_t>(cls) < classes.size(), source, ": ", where, ".ring_class ", cls,
            " does not exist (", classes.size(), " ring classes)");
    const nlohmann::json& class_rings = member(classes[static_cast<size_t>(cls)], "rings", source,
                                               str("ring_classes[", cls, "]"));
    require(class_rings.is_array(), source, ": ring_classes[", cls, "].rings must be an array");
    if (passes[b].size() <= static_cast<size_t>(layer)) {
      passes[b].resize(static_cast<size_t>(layer) + 1, StepMatrix(static_cast<size_t>(world)));
      filled[b].resize(static_cast<size_t>(layer) + 1, std::vector<bool>(static_cast<size_t>(world), false));
    }
    const nlohmann::json& ranks = member(pass, "ranks", source, where);
    require(ranks.is_array() && static_cast<int64_t>(ranks.size()) == steps, source, ": ", where, ".ranks must list ",
            steps, " ring positions");
    for (size_t k = 0; k < ranks.size(); ++k) {
      const std::string rank_where = str(where, ".ranks[", k, "]");
      const int64_t position = member_int(ranks[k], "position", source, rank_where);
      require(position >= 0 && position < steps, source, ": ", rank_where, ".position ", position,
              " is not a ring position");
      const std::vector<int64_t> row =
          read_row(member(ranks[k], "compute_ns", source, rank_where), source, rank_where + ".compute_ns", steps);
      for (size_t j = 0; j < class_rings.size(); ++j) {
        const nlohmann::json& ring_value = class_rings[j];
        require(ring_value.is_number_integer() && ring_value.get<int64_t>() >= 0 &&
                    ring_value.get<int64_t>() < plan.ring_count(),
                source, ": ring_classes[", cls, "].rings[", j, "] is not a ring of the plan (", plan.ring_count(),
                " rings)");
        const auto g = static_cast<size_t>(plan.global_rank(ring_value.get<int64_t>(), position));
        passes[b][static_cast<size_t>(layer)][g] = row;
        filled[b][static_cast<size_t>(layer)][g] = true;
      }
    }
  }
  require(!passes[0].empty(), source, ": the simulation result has no forward ring pass");
  for (int b = 0; b < 2; ++b) {
    for (size_t layer = 0; layer < filled[b].size(); ++layer) {
      for (size_t g = 0; g < filled[b][layer].size(); ++g) {
        require(filled[b][layer][g], source, ": the ", b ? "backward" : "forward", " pass of layer ", layer,
                " has no figures for global rank ", g);
      }
    }
  }
  require(passes[1].empty() || passes[1].size() == passes[0].size(), source, ": the simulation has ", passes[0].size(),
          " forward layers but ", passes[1].size(), " backward layers");
  return StepDurations{std::move(passes[0]), std::move(passes[1])};
}

}  // namespace

StepDurations parse_step_durations(const std::string& json_text, std::string_view source_name, const PlanConfig& plan) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& error) {
    throw InputError(str(source_name, ": not valid JSON: ", error.what()));
  }
  require(doc.is_object(), source_name, ": the durations file must be a JSON object, got ", doc.type_name());
  if (doc.contains("format") && doc["format"] == "sparsering-simulation") {
    return parse_simulation(doc, source_name, plan);
  }
  if (doc.contains("format")) {
    require(doc["format"] == "sparsering-step-durations", source_name,
            ": format must be \"sparsering-step-durations\" or \"sparsering-simulation\", got ", doc["format"].dump());
  }
  return parse_step_schema(doc, source_name, plan);
}

StepDurations load_step_durations(const std::string& path, const PlanConfig& plan) {
  return parse_step_durations(read_file(path), path, plan);
}

}  // namespace sparsering
