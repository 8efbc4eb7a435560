// Per-sample simulations side by side (sim/output/sample_summary.hpp).
#include "sim/output/sample_summary.hpp"

#include <string>

#include "common/error.hpp"
#include "common/table.hpp"
#include "sim/output/sample_statistics.hpp"

namespace sparsering {

namespace {

/// The figures compared across samples, as (name, value of one result).
struct Figure {
  const char* name;
  double (*of)(const SimulationResult&);
};

double attention_total(const SimulationResult& r, bool backward) {
  double total = 0.0;
  for (const LayerResult& l : r.layers) total += static_cast<double>(backward ? l.attention_bwd_ns : l.attention_fwd_ns);
  return total;
}

const Figure kFigures[] = {
    {"step_ms", [](const SimulationResult& r) { return ns_to_ms(r.step.step_ns); }},
    {"tokens_per_s", [](const SimulationResult& r) { return r.step.tokens_per_s; }},
    {"attention_fwd_ms", [](const SimulationResult& r) { return attention_total(r, false) * 1e-6; }},
    {"attention_bwd_ms", [](const SimulationResult& r) { return attention_total(r, true) * 1e-6; }},
    {"worker_imbalance", [](const SimulationResult& r) { return r.worker_imbalance; }},
    {"step_imbalance", [](const SimulationResult& r) { return r.step_imbalance; }},
    {"exposed_share", [](const SimulationResult& r) { return r.exposed_share; }},
    {"peak_memory_gib",
     [](const SimulationResult& r) { return static_cast<double>(r.memory.peak_bytes) / static_cast<double>(int64_t{1} << 30); }},
};

void check(const std::vector<int64_t>& samples, const std::vector<SimulationResult>& results) {
  require(!samples.empty() && samples.size() == results.size(), "a sample summary needs one result per sample, got ",
          results.size(), " for ", samples.size());
}

std::vector<double> values_of(const Figure& f, const std::vector<SimulationResult>& results) {
  std::vector<double> out;
  for (const SimulationResult& r : results) out.push_back(f.of(r));
  return out;
}

}  // namespace

nlohmann::json sample_summary_json(const std::vector<int64_t>& samples, const std::vector<SimulationResult>& results) {
  check(samples, results);
  nlohmann::json rows = nlohmann::json::array();
  for (size_t k = 0; k < results.size(); ++k) {
    nlohmann::json row = {{"sample", samples[k]}};
    for (const Figure& f : kFigures) row[f.name] = f.of(results[k]);
    rows.push_back(row);
  }
  nlohmann::json aggregate = nlohmann::json::object();
  for (const Figure& f : kFigures) {
    const std::vector<double> v = values_of(f, results);
    const SampleSpread spread = sample_spread(v);
    nlohmann::json entry = {{"min", spread.min}, {"stdev", spread.stdev}};
    for (const SampleStatistic s : {SampleStatistic::mean, SampleStatistic::p50, SampleStatistic::p90, SampleStatistic::max}) {
      entry[std::string(to_string(s))] = sample_statistic(v, s);
    }
    aggregate[f.name] = entry;
  }
  return {{"samples", rows}, {"aggregate", aggregate}};
}

void print_sample_summary(std::ostream& out, const std::vector<int64_t>& samples,
                          const std::vector<SimulationResult>& results) {
  check(samples, results);
  Table table({"sample", "step ms", "tokens/s", "attn fwd ms", "attn bwd ms", "worker imb", "step imb", "exposed %",
               "peak GiB"});
  const auto row = [&](const std::string& label, const std::vector<double>& v) {
    table.add_row({label, fixed(v[0], 3), fixed(v[1], 0), fixed(v[2], 3), fixed(v[3], 3), fixed(v[4], 3), fixed(v[5], 3),
                   fixed(100.0 * v[6], 1), fixed(v[7], 2)});
  };
  for (size_t k = 0; k < results.size(); ++k) {
    std::vector<double> v;
    for (const Figure& f : kFigures) v.push_back(f.of(results[k]));
    row(std::to_string(samples[k]), v);
  }
  const auto statistic_row = [&](const std::string& label, auto&& of) {
    std::vector<double> v;
    for (const Figure& f : kFigures) v.push_back(of(values_of(f, results)));
    row(label, v);
  };
  for (const SampleStatistic s : {SampleStatistic::mean, SampleStatistic::p50, SampleStatistic::p90, SampleStatistic::max}) {
    statistic_row(std::string(to_string(s)), [&](const std::vector<double>& v) { return sample_statistic(v, s); });
  }
  statistic_row("min", [](const std::vector<double>& v) { return sample_spread(v).min; });
  statistic_row("stdev", [](const std::vector<double>& v) { return sample_spread(v).stdev; });
  out << "per trace sample (" << results.size() << "), then statistics over them:\n";
  table.print(out);
}

}  // namespace sparsering
