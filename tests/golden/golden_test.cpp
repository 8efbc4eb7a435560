// Golden end-to-end outputs of the simulator: every shipped example plan (configs/plans/*.yaml)
// and the small plans beside this file (tests/golden/data/*.yaml) is simulated and its key
// figures (the training step, memory, figures of merit, and per layer the attention times, layer
// times, work and imbalance) plus a hash of the full result JSON are compared exactly with
// tests/golden/data/<plan>.golden.json.
//
// Traces: a plan's own `trace:` when it names one (the bundled 32K sample), otherwise, for a
// sparse plan, a trace synthesized here from the model's sparsity prior at the plan's length
// with seed 7 and 512 vertical / 512 slash candidate slots (few slots keep the suite fast);
// dense plans need none. Regenerate the golden files after an intended change with
//     SPARSERING_UPDATE_GOLDEN=1 ctest --test-dir <build> -L golden
// (tests/golden/README.md) and review the diff.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "sim/config/plan_config.hpp"
#include "sim/output/result_json.hpp"
#include "sim/step/simulation.hpp"
#include "traces/safetensors_trace.hpp"
#include "traces/sparsity_prior.hpp"
#include "traces/synth/synthetic_trace.hpp"

namespace sparsering {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kSynthSeed = 7;
constexpr int64_t kSynthSlots = 512;

fs::path source_dir() { return fs::path(SPARSERING_SOURCE_DIR); }
fs::path golden_dir() { return source_dir() / "tests" / "golden" / "data"; }

bool update_mode() {
  const char* value = std::getenv("SPARSERING_UPDATE_GOLDEN");
  return value != nullptr && std::string(value) == "1";
}

/// Every plan under test, as paths relative to the source folder, sorted.
std::vector<std::string> golden_plans() {
  std::vector<std::string> out;
  for (const fs::path& folder : {source_dir() / "configs" / "plans", golden_dir()}) {
    if (!fs::is_directory(folder)) continue;
    for (const auto& entry : fs::directory_iterator(folder)) {
      if (entry.path().extension() == ".yaml") out.push_back(fs::relative(entry.path(), source_dir()).string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// A trace synthesized once per (model, length) for the whole suite.
const Trace& synthetic_trace(const ModelConfig& model, int64_t seq_len_tokens) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Trace>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Trace>& slot = cache[str(model.name, "@", seq_len_tokens)];
  if (!slot) {
    SynthSettings settings;
    settings.model = model.name;
    settings.layers = model.layers;
    settings.q_heads = model.q_heads;
    settings.kv_heads = model.kv_heads;
    settings.seq_len_tokens = seq_len_tokens;
    settings.seed = kSynthSeed;
    settings.vertical_slots = kSynthSlots;
    settings.slash_slots = kSynthSlots;
    settings.threads = 1;
    settings.prior = load_sparsity_prior(sparsity_prior_path(model));
    slot = std::make_unique<Trace>(synthesize_trace(settings));
  }
  return *slot;
}

/// FNV-1a, 64 bits, of a text.
std::string fnv1a64(const std::string& text) {
  uint64_t h = 14695981039346656037ULL;
  for (const char c : text) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ULL;
  }
  std::ostringstream out;
  out << std::hex << h;
  return "fnv1a64:" + out.str();
}

/// A ratio as an integer in parts per million (exact in the golden file, unlike a printed double).
int64_t ppm(double value) { return static_cast<int64_t>(std::llround(value * 1e6)); }

/// The golden summary as text: one key per line, one line per layer, so diffs are readable.
std::string golden_text(const std::string& plan_path, const std::string& trace_source, const SimulationResult& r) {
  const nlohmann::json step = {{"step_ns", r.step.step_ns},
                               {"forward_ns", r.step.forward_ns},
                               {"backward_ns", r.step.backward_ns},
                               {"lm_head_ns", r.step.lm_head_ns},
                               {"grad_sync_ns", r.step.grad_sync_ns},
                               {"grad_sync_exposed_ns", r.step.grad_sync_exposed_ns},
                               {"optimizer_ns", r.step.optimizer_ns},
                               {"tokens_per_step", r.step.tokens_per_step},
                               {"tokens_per_s", std::llround(r.step.tokens_per_s)}};
  const nlohmann::json figures = {{"worker_imbalance_ppm", ppm(r.worker_imbalance)},
                                  {"step_imbalance_ppm", ppm(r.step_imbalance)},
                                  {"exposed_share_ppm", ppm(r.exposed_share)}};
  nlohmann::json memory = {{"peak_bytes", r.memory.peak_bytes}, {"fits", r.memory.fits}};
  for (const MemoryItem& item : r.memory.items) memory[item.name] = item.bytes;
  nlohmann::json classes = nlohmann::json::array();
  for (const RingClass& c : r.ring_classes) classes.push_back(c.rings);
  std::ostringstream out;
  out << "{\n";
  out << "\"format\": \"sparsering-golden\",\n";
  out << "\"plan\": " << nlohmann::json(plan_path).dump() << ",\n";
  out << "\"trace\": " << nlohmann::json(trace_source).dump() << ",\n";
  out << "\"calibrated\": " << (r.calibrated ? "true" : "false") << ",\n";
  out << "\"step\": " << step.dump() << ",\n";
  out << "\"figures\": " << figures.dump() << ",\n";
  out << "\"memory\": " << memory.dump() << ",\n";
  out << "\"ring_classes\": " << classes.dump() << ",\n";
  out << "\"layer_fields\": [\"layer\", \"attention_fwd_ns\", \"attention_bwd_ns\", \"forward_ns\", \"backward_ns\", "
         "\"tiles\", \"masked_tiles\", \"columns\", \"column_chunks\", \"worker_imbalance_ppm\", "
         "\"step_imbalance_ppm\", \"exposed_share_ppm\", \"backward_exposed_share_ppm\"],\n";
  out << "\"layers\": [\n";
  for (size_t k = 0; k < r.layers.size(); ++k) {
    const LayerResult& l = r.layers[k];
    const nlohmann::json row = {l.layer,          l.attention_fwd_ns,       l.attention_bwd_ns,  l.forward_ns,
                                l.backward_ns,    l.work.tiles,             l.work.masked_tiles, l.work.columns,
                                l.work.column_chunks, ppm(l.worker_imbalance), ppm(l.step_imbalance),
                                ppm(l.exposed_share), ppm(l.backward_exposed_share)};
    out << "  " << row.dump() << (k + 1 < r.layers.size() ? ",\n" : "\n");
  }
  out << "],\n";
  // This build's kernel identity changes with every kernel source edit, the simulation does not.
  nlohmann::json full = result_to_json(r);
  full["calibration"]["this_kernel_build"] = "this build";
  out << "\"result_hash\": " << nlohmann::json(fnv1a64(full.dump())).dump() << "\n";
  out << "}\n";
  return out.str();
}

/// The first line where two texts differ, for the failure message.
std::string first_difference(const std::string& expected, const std::string& actual) {
  std::istringstream a(expected);
  std::istringstream b(actual);
  std::string la;
  std::string lb;
  for (int line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(a, la));
    const bool more_b = static_cast<bool>(std::getline(b, lb));
    if (!more_a && !more_b) return "identical";
    if (!more_a || !more_b || la != lb) {
      return str("line ", line, ":\n  golden: ", more_a ? la : "(end)", "\n  now:    ", more_b ? lb : "(end)");
    }
  }
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, MatchesGoldenSummary) {
  const std::string plan_rel = GetParam();
  const LoadedPlan loaded = load_plan_with_inputs(source_dir() / plan_rel);
  const Trace* trace = nullptr;
  Trace own;
  std::string trace_source = "none (dense)";
  if (loaded.plan.sparse.enabled) {
    if (!loaded.plan.trace_path.empty()) {
      own = read_trace(loaded.plan.trace_path);
      trace = &own;
      trace_source = fs::relative(loaded.plan.trace_path, source_dir()).string();
    } else {
      trace = &synthetic_trace(loaded.model, loaded.plan.seq_len_tokens);
      trace_source = str("synthesized: model prior, seed ", kSynthSeed, ", ", kSynthSlots, " vertical / ", kSynthSlots,
                         " slash slots, ", loaded.plan.seq_len_tokens, " tokens");
    }
  }
  SimulationContext context;
  SimulationOptions options;
  const SimulationResult result = simulate(context, loaded.plan, loaded.model, loaded.cluster, trace, options);
  const std::string actual = golden_text(plan_rel, trace_source, result);

  const fs::path golden = golden_dir() / (fs::path(plan_rel).stem().string() + ".golden.json");
  if (update_mode()) {
    write_file_atomically(golden, actual, true);
    std::cout << "updated " << golden.string() << "\n";
    return;
  }
  ASSERT_TRUE(fs::exists(golden)) << "no golden file " << golden.string()
                                  << " for " << plan_rel << "; create it with SPARSERING_UPDATE_GOLDEN=1 ctest -L golden";
  const std::string expected = read_file(golden);
  EXPECT_EQ(expected, actual) << plan_rel << " differs from " << golden.string() << " at "
                              << first_difference(expected, actual)
                              << "\nIf the change is intended, regenerate with SPARSERING_UPDATE_GOLDEN=1 ctest -L golden"
                                 " and review the diff.";
}

TEST(GoldenFiles, EveryGoldenFileHasAPlan) {
  // A golden file whose plan was removed or renamed is stale.
  std::vector<std::string> stems;
  for (const std::string& plan : golden_plans()) stems.push_back(fs::path(plan).stem().string());
  for (const auto& entry : fs::directory_iterator(golden_dir())) {
    const std::string name = entry.path().filename().string();
    const std::string suffix = ".golden.json";
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const std::string stem = name.substr(0, name.size() - suffix.size());
    EXPECT_NE(std::find(stems.begin(), stems.end(), stem), stems.end()) << name << " has no plan";
  }
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = fs::path(info.param).stem().string();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Plans, GoldenTest, ::testing::ValuesIn(golden_plans()), test_name);

}  // namespace
}  // namespace sparsering
