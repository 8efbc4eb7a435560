// Text and JSON renderings of a TraceSummary.
#include "traces/trace_summary_report.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/json_text.hpp"
#include "common/table.hpp"

namespace sparsering {
namespace {

std::string percent(double fraction) { return fixed(100.0 * fraction, 2); }

nlohmann::json distribution_json(const Distribution& d) {
  return {{"min", d.min}, {"p50", d.p50}, {"p90", d.p90}, {"max", d.max}, {"mean", d.mean}};
}

std::string seq_len_text(const TraceSummary& s) {
  const auto [lo, hi] = std::minmax_element(s.sample_seq_len.begin(), s.sample_seq_len.end());
  return *lo == *hi ? std::to_string(*lo) : std::to_string(*lo) + ".." + std::to_string(*hi);
}

}  // namespace

void print_trace_summary(std::ostream& out, const TraceSummary& s, bool per_head) {
  out << "trace: model " << (s.metadata.model.empty() ? "?" : s.metadata.model) << ", " << s.metadata.source << ", "
      << s.samples << " samples x " << s.layers << " layers x " << s.heads << " heads, seq_len " << seq_len_text(s)
      << " tokens, candidate slots " << s.vertical_candidates << " vertical / " << s.slash_candidates << " slash\n";
  out << "selection: recall " << s.settings.recall.recall << ", caps " << s.settings.recall.max_verticals
      << " verticals / " << s.settings.recall.max_slashes << " slashes, min " << s.settings.recall.min_entries
      << ", tiles " << s.settings.block_tokens << "x" << s.settings.block_tokens << "\n";
  out << "overall: tile sparsity " << percent(1.0 - s.tile_density) << "% (density " << percent(s.tile_density)
      << "%), element sparsity " << percent(1.0 - s.element_density) << "%; heads at cap: " << s.heads_at_vertical_cap
      << " vertical, " << s.heads_at_slash_cap << " slash (of " << s.samples * s.layers * s.heads << ")\n\n";

  Table budgets({"kept per head", "min", "p50", "p90", "max", "mean"});
  auto add = [&](const char* name, const Distribution& d, int digits) {
    budgets.add_row({name, fixed(d.min, digits), fixed(d.p50, digits), fixed(d.p90, digits), fixed(d.max, digits),
                     fixed(d.mean, digits)});
  };
  add("verticals", s.kept_verticals, 0);
  add("slashes", s.kept_slashes, 0);
  Distribution density = s.head_tile_density;
  for (double* v : {&density.min, &density.p50, &density.p90, &density.max, &density.mean}) *v *= 100.0;
  add("tile density %", density, 2);
  budgets.print(out);
  out << '\n';

  Table layers({"layer", "verticals", "slashes", "tile density %", "tile sparsity %", "element sparsity %"});
  for (const auto& l : s.layer_summaries) {
    layers.add_row({std::to_string(l.layer), fixed(l.kept_verticals, 1), fixed(l.kept_slashes, 1),
                    percent(l.tile_density), percent(1.0 - l.tile_density), percent(1.0 - l.element_density)});
  }
  layers.print(out);
  if (per_head) {
    out << '\n';
    Table heads({"layer", "head", "verticals", "slashes", "tile density %", "element density %"});
    for (const auto& h : s.head_summaries) {
      heads.add_row({std::to_string(h.layer), std::to_string(h.head), fixed(h.kept_verticals, 1),
                     fixed(h.kept_slashes, 1), percent(h.tile_density), percent(h.element_density)});
    }
    heads.print(out);
  }
}

std::string trace_summary_json(const TraceSummary& s, bool per_head) {
  nlohmann::json doc;
  doc["trace"] = {{"model", s.metadata.model},
                  {"source", s.metadata.source},
                  {"samples", s.samples},
                  {"layers", s.layers},
                  {"heads", s.heads},
                  {"vertical_candidates", s.vertical_candidates},
                  {"slash_candidates", s.slash_candidates},
                  {"seq_len_tokens", s.sample_seq_len},
                  {"last_q", s.metadata.last_q},
                  {"block_q", s.metadata.block_q},
                  {"block_k", s.metadata.block_k},
                  {"provenance", s.metadata.provenance}};
  doc["settings"] = {{"recall", s.settings.recall.recall},
                     {"max_verticals", s.settings.recall.max_verticals},
                     {"max_slashes", s.settings.recall.max_slashes},
                     {"min_entries", s.settings.recall.min_entries},
                     {"block_tokens", s.settings.block_tokens}};
  doc["overall"] = {{"tile_density", s.tile_density},
                    {"tile_sparsity", 1.0 - s.tile_density},
                    {"element_density", s.element_density},
                    {"element_sparsity", 1.0 - s.element_density},
                    {"heads_at_vertical_cap", s.heads_at_vertical_cap},
                    {"heads_at_slash_cap", s.heads_at_slash_cap}};
  doc["budgets"] = {{"kept_verticals", distribution_json(s.kept_verticals)},
                    {"kept_slashes", distribution_json(s.kept_slashes)},
                    {"head_tile_density", distribution_json(s.head_tile_density)}};
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : s.layer_summaries) {
    layers.push_back({{"layer", l.layer},
                      {"kept_verticals", l.kept_verticals},
                      {"kept_slashes", l.kept_slashes},
                      {"tile_density", l.tile_density},
                      {"tile_sparsity", 1.0 - l.tile_density},
                      {"element_density", l.element_density}});
  }
  doc["layers"] = layers;
  if (per_head) {
    nlohmann::json heads = nlohmann::json::array();
    for (const auto& h : s.head_summaries) {
      heads.push_back({{"layer", h.layer},
                       {"head", h.head},
                       {"kept_verticals", h.kept_verticals},
                       {"kept_slashes", h.kept_slashes},
                       {"tile_density", h.tile_density},
                       {"element_density", h.element_density}});
    }
    doc["heads"] = heads;
  }
  return dump_json(doc, 2) + "\n";
}

}  // namespace sparsering
