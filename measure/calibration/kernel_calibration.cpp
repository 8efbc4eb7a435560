// The CSV reader is measure/calibration/csv_rows.hpp (columns by header name, whole cells parsed).
#include "measure/calibration/kernel_calibration.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "common/error.hpp"
#include "common/median.hpp"
#include "kernels/index/count_sparse_index.hpp"
#include "measure/calibration/csv_rows.hpp"
#include "measure/calibration/link_fit.hpp"
#include "measure/calibration/replayed_cells.hpp"
#include "measure/calibration/synthetic_index.hpp"
#include "sim/cost/kernel_cost.hpp"

namespace sparsering {
namespace {

KernelShape shape_of(const KernelMeasurement& m) { return {m.block_q, m.block_k, m.head_dim}; }

/// Median signed residual per value of `key` (ascending).
template <typename Key>
std::vector<ResidualGroup> residuals_by(const std::vector<const KernelMeasurement*>& launches, const std::vector<double>& errors,
                                        Key key) {
  std::map<int64_t, std::vector<double>> groups;
  for (size_t k = 0; k < launches.size(); ++k) groups[key(*launches[k])].push_back(errors[k]);
  std::vector<ResidualGroup> out;
  for (auto& [value, group] : groups) {
    const auto n = static_cast<int64_t>(group.size());
    out.push_back({value, n, median(std::move(group))});
  }
  return out;
}

KernelSample sample_of(const KernelMeasurement& k, int64_t sm_count) {
  KernelSample s{k.tiles, k.column_chunks, k.median_us, k.lists};
  s.key_lists = std::max<int64_t>(k.key_lists, 0);
  s.column_lists = std::max<int64_t>(k.column_lists, 0);
  s.column_items = std::max<int64_t>(k.column_items, 0);
  s.columns = std::max<int64_t>(k.columns, 0);
  s.key_blocks = launched_key_blocks(k);
  s.critical_entries = critical_entries(k, sm_count);
  return s;
}

bool has_backward_units(const KernelMeasurement& k) {
  return k.key_lists >= 0 && k.column_lists >= 0 && k.column_items >= 0 && k.columns >= 0;
}

bool has_every_count(const KernelMeasurement& k) { return has_backward_units(k) && k.longest_key_list >= 0; }

}  // namespace

double critical_entries(const KernelMeasurement& m, int64_t sm_count) {
  if (m.direction != "backward" || m.longest_key_list < 0) return 0.0;
  return critical_entries(m.longest_key_list, m.tiles, sm_count);  // sim/cost/kernel_cost.hpp
}

double benchmark_sm_clock_mhz(const std::vector<KernelMeasurement>& kernels) {
  std::vector<double> clocks;
  for (const KernelMeasurement& k : kernels) {
    if (!is_replayed_cell(k) && k.sm_clock_mhz > 0.0) clocks.push_back(k.sm_clock_mhz);
  }
  return median(std::move(clocks));  // 0 for none
}

KernelTerms fit_terms(const std::vector<KernelMeasurement>& launches, const std::string& direction, int64_t sm_count) {
  if (launches.empty()) return KernelTerms::four_terms();
  if (direction != "backward") {
    for (const KernelMeasurement& k : launches) {
      if (k.column_items < 0) return KernelTerms::four_terms();  // recorded before items were
    }
    return KernelTerms::forward_units();
  }
  bool partial_items = false;
  bool partial_key_lists = false;
  bool longest_recorded = sm_count >= 1;
  for (const KernelMeasurement& k : launches) {
    if (!has_backward_units(k)) return KernelTerms::four_terms();
    partial_items = partial_items || k.columns != 64 * k.column_items;
    partial_key_lists = partial_key_lists || (!k.under_filled && lists_part_of_the_chunk(k));
    longest_recorded = longest_recorded && k.longest_key_list >= 0;
  }
  return KernelTerms::backward_units(partial_items, partial_key_lists, longest_recorded);
}

namespace {

/// The distinct replays among `launches`, in order of first appearance.
std::vector<std::string> replay_names(const std::vector<const KernelMeasurement*>& launches) {
  std::vector<std::string> replays;
  for (const KernelMeasurement* k : launches) {
    if (is_replayed_cell(*k) && std::find(replays.begin(), replays.end(), k->placement) == replays.end()) {
      replays.push_back(k->placement);
    }
  }
  return replays;
}

int64_t replays_among(const std::vector<const KernelMeasurement*>& launches) {
  return static_cast<int64_t>(replay_names(launches).size());
}

/// Gives each of `samples` (one per launch) the fit weight of its launch (launch_weights).
void weigh_as_the_fit(const std::vector<const KernelMeasurement*>& launches, std::vector<KernelSample>& samples,
                      double grid_weight) {
  const std::vector<double> weights = launch_weights(launches, grid_weight);
  for (size_t k = 0; k < samples.size(); ++k) samples[k].weight = weights[k];
}

/// The median |error| of each replay's cells predicted by the fit (weights of `grid_weight`)
/// without that replay, and those errors in the launches' order (0 for grid launches).
HeldOutError replays_held_out(const std::vector<const KernelMeasurement*>& launches,
                              const std::vector<KernelSample>& samples, double grid_weight, const KernelTerms& terms) {
  const std::vector<std::string> replays = replay_names(launches);
  HeldOutError out;
  out.folds = static_cast<int64_t>(replays.size());
  out.relative_errors.assign(samples.size(), 0.0);
  // Each replay weighs as much as any other, as in the fit: a 32-rank ring's 1024 cells do not
  // outvote an 8-rank ring's 64.
  const std::vector<double> all_weights = launch_weights(launches, grid_weight);
  std::vector<double> held;
  std::vector<double> held_weights;
  for (const std::string& left_out : replays) {
    std::vector<const KernelMeasurement*> kept;
    std::vector<KernelSample> training;
    for (size_t k = 0; k < launches.size(); ++k) {
      if (launches[k]->placement == left_out) continue;
      kept.push_back(launches[k]);
      training.push_back(samples[k]);
    }
    weigh_as_the_fit(kept, training, grid_weight);
    KernelCostCoefficients c;
    try {
      c = rounded_coefficients(fit_kernel_cost(training, terms).coefficients);
    } catch (const InputError& error) {
      throw InputError(str("the fit without replay ", left_out.substr(kReplayedPlacement.size()), " (grid weight ",
                           grid_weight, "): ", error.what()));
    }
    for (size_t k = 0; k < launches.size(); ++k) {
      if (launches[k]->placement != left_out) continue;
      const KernelSample& s = samples[k];
      out.relative_errors[k] = (predict_kernel_us(c, s) - s.time_us) / s.time_us;
      held.push_back(out.relative_errors[k]);
      held_weights.push_back(all_weights[k]);
    }
  }
  out.samples = static_cast<int64_t>(held.size());
  std::tie(out.median_relative_error, out.max_relative_error) = median_and_max_magnitude(held, held_weights);
  return out;
}

DirectionFit fit_direction(std::vector<KernelMeasurement>& kernels, const KernelShape& shape, const std::string& direction,
                           const FitOptions& options) {
  std::vector<const KernelMeasurement*> filled_launches;
  std::vector<KernelSample> filled;
  std::vector<KernelSample> under;
  std::vector<int64_t> case_ids;
  std::map<std::tuple<int32_t, int32_t, int64_t, int32_t, int32_t, int32_t, std::string, int32_t>, int64_t> cases;
  std::vector<KernelMeasurement> mine;
  for (const KernelMeasurement& k : kernels) {
    if (k.direction == direction && shape_of(k) == shape) mine.push_back(k);
  }
  const KernelTerms terms = fit_terms(mine, direction, options.sm_count);
  // An under-filled launch (few CTAs) takes its heaviest CTA's time: kept out of a fit without a
  // term for that. The backward's critical-path term is one, and with two or more replays the
  // grid's weight is chosen on held-out replayed cells, so the grid's smallest launches (bound by
  // launch latency as much as by their heaviest CTA) cannot pull the fit away from real cells:
  // then the backward's under-filled launches are fitted too.
  std::vector<const KernelMeasurement*> all_launches;
  bool critical_entries_seen = false;
  for (const KernelMeasurement& k : mine) {
    all_launches.push_back(&k);
    critical_entries_seen = critical_entries_seen || critical_entries(k, options.sm_count) > 0.0;
  }
  const bool fit_under_filled = terms.critical && critical_entries_seen && replays_among(all_launches) >= 2;
  for (const KernelMeasurement& k : kernels) {
    if (k.direction != direction || !(shape_of(k) == shape)) continue;
    const KernelSample sample = sample_of(k, options.sm_count);
    if (k.under_filled && !fit_under_filled) {
      under.push_back(sample);
      continue;
    }
    filled.push_back(sample);
    filled_launches.push_back(&k);
    // A replay's cells share their plan's shape, placement and per-list counts (0): one case each.
    const auto key = std::make_tuple(k.q_heads, k.kv_heads, k.local_tokens, k.tiles_per_list, k.chunks_per_list,
                                     k.columns_per_list, k.placement, k.key_block_stride);
    case_ids.push_back(cases.emplace(key, static_cast<int64_t>(cases.size())).first->second);
  }
  DirectionFit fit;
  try {
    // The grid's weight, chosen on the replays among `launches`, and the fit it gives; the held-out
    // folds call it again on their training launches alone.
    const auto choose_and_fit = [&](const std::vector<const KernelMeasurement*>& launches, std::vector<KernelSample> samples,
                                    double& grid_weight, HeldOutError& chosen_heldout) {
      grid_weight = 1.0;
      if (replays_among(launches) >= 2) {
        double best = 0.0;
        for (const double weight : kGridWeights) {
          const HeldOutError held = replays_held_out(launches, samples, weight, terms);
          if (weight == kGridWeights[0] || held.median_relative_error < best) {
            best = held.median_relative_error;
            grid_weight = weight;
            chosen_heldout = held;
          }
        }
      }
      weigh_as_the_fit(launches, samples, grid_weight);
      return rounded_coefficients(fit_kernel_cost(samples, terms).coefficients);
    };
    fit.replays = replays_among(filled_launches);
    const KernelCostCoefficients c = choose_and_fit(filled_launches, filled, fit.grid_weight, fit.replayed_heldout);
    // The error figures weigh each launch as the fit did (the held-out folds refit with their own).
    weigh_as_the_fit(filled_launches, filled, fit.grid_weight);
    fit.fit = evaluate_kernel_cost(c, filled);
    fit.under = evaluate_kernel_cost(c, under);
    TrainingFit fold_fit;
    if (fit.replays > 0) {
      fold_fit = [&](const std::vector<size_t>& training) {
        std::vector<const KernelMeasurement*> launches;
        std::vector<KernelSample> samples;
        for (const size_t k : training) {
          launches.push_back(filled_launches[k]);
          samples.push_back(filled[k]);
        }
        double weight = 1.0;
        HeldOutError unused;
        return choose_and_fit(launches, std::move(samples), weight, unused);
      };
    }
    fit.heldout = heldout_error(filled, case_ids, options.folds, options.seed, terms, fold_fit, options.dealings);
    if (fit.replays > 0) {
      std::vector<KernelSample> cells;
      for (size_t k = 0; k < filled.size(); ++k) {
        if (is_replayed_cell(*filled_launches[k])) cells.push_back(filled[k]);
      }
      fit.replayed = evaluate_kernel_cost(c, cells);
    }
  } catch (const InputError& error) {
    throw InputError(str(direction, " of shape ", to_string(shape), " (", filled.size(), " filled launches): ", error.what()));
  }
  fit.by_local_tokens = residuals_by(filled_launches, fit.fit.relative_errors,
                                     [](const KernelMeasurement& m) { return m.local_tokens; });
  fit.by_group = residuals_by(filled_launches, fit.fit.relative_errors,
                              [](const KernelMeasurement& m) { return int64_t{m.q_heads / std::max(m.kv_heads, 1)}; });
  for (KernelMeasurement& k : kernels) {
    if (k.direction == direction && shape_of(k) == shape) {
      k.predicted_us = predict_kernel_us(fit.fit.coefficients, sample_of(k, options.sm_count));
    }
  }
  return fit;
}

double worse(double a, double b) { return round_significant(std::max(a, b), 3); }

}  // namespace

std::vector<double> launch_weights(const std::vector<const KernelMeasurement*>& launches, double grid_weight) {
  std::map<std::string, int64_t> cells_of_replay;
  int64_t grid = 0;
  for (const KernelMeasurement* k : launches) {
    if (is_replayed_cell(*k)) {
      ++cells_of_replay[k->placement];
    } else {
      ++grid;
    }
  }
  std::vector<double> weights(launches.size(), 1.0);
  if (cells_of_replay.empty()) return weights;
  const double per_replay = static_cast<double>(std::max<int64_t>(grid, 1)) / static_cast<double>(cells_of_replay.size());
  for (size_t k = 0; k < launches.size(); ++k) {
    weights[k] = is_replayed_cell(*launches[k])
                     ? per_replay / static_cast<double>(cells_of_replay.at(launches[k]->placement))
                     : grid_weight;
  }
  return weights;
}

void restore_backward_units(std::vector<KernelMeasurement>& kernels, uint64_t bench_seed) {
  // Rows come in (forward, backward) pairs of one index: it is rebuilt once per pair.
  for (size_t row = 0; row < kernels.size(); ++row) {
    KernelMeasurement& k = kernels[row];
    // Replayed cells are no benchmark case: what they lack stays -1 (their term is not fitted).
    if (has_every_count(k) || is_replayed_cell(k)) continue;
    // The benchmark writes each case's forward and backward in turn; case n drew its index with
    // seed bench_seed + n (measure/bench/kernel_bench.cu).
    const size_t first = row - row % 2;
    require(first + 1 < kernels.size(), "restore_backward_units: row ", row + 1, " has no forward/backward partner");
    const KernelMeasurement& a = kernels[first];
    const KernelMeasurement& b = kernels[first + 1];
    require(a.direction == "forward" && b.direction == "backward" && a.q_heads == b.q_heads && a.kv_heads == b.kv_heads &&
                a.local_tokens == b.local_tokens && shape_of(a) == shape_of(b) && a.tiles_per_list == b.tiles_per_list &&
                a.chunks_per_list == b.chunks_per_list && a.placement == b.placement &&
                a.key_block_stride == b.key_block_stride,
            "restore_backward_units: rows ", first + 1, " and ", first + 2,
            " are not the forward and backward of one benchmark case (the benchmark's order)");
    require(k.kv_heads >= 1 && k.q_heads % k.kv_heads == 0, "restore_backward_units: row ", row + 1, ": ", k.q_heads,
            " query heads over ", k.kv_heads, " K/V heads");
    SyntheticIndexSpec spec;
    spec.rows = k.q_heads;
    spec.q_len_tokens = k.local_tokens;
    spec.kv_len_tokens = k.local_tokens;
    spec.block_q = k.block_q;
    spec.block_k = k.block_k;
    spec.tiles_per_list = k.tiles_per_list;
    spec.chunks_per_list = k.chunks_per_list;
    spec.columns_per_list = k.columns_per_list;
    spec.seed = bench_seed + first / 2;
    spec.banded = k.placement == "banded";
    spec.key_block_stride = k.key_block_stride;
    spec.sorted_columns = false;  // only counted
    const SparseIndex index = make_synthetic_index(spec);
    const BackwardUnits units = backward_units(index, k.q_heads / k.kv_heads);
    for (size_t r = row; r < first + 2; ++r) {
      KernelMeasurement& m = kernels[r];
      if (has_every_count(m) || m.columns_per_list != k.columns_per_list) continue;  // the latter: its own index
      require(index.tiles() == m.tiles && index.column_chunks() == m.column_chunks &&
                  int64_t{index.rows} * index.q_blocks == m.lists,
              "restore_backward_units: row ", r + 1, ": the rebuilt index has ", index.tiles(), " tiles and ",
              index.column_chunks(), " chunks, the record ", m.tiles, " and ", m.column_chunks);
      if (has_backward_units(m)) {  // only the longest segment is missing: the recorded units must agree
        require(m.key_lists == units.key_lists && m.column_lists == units.column_lists &&
                    m.column_items == units.column_items && m.columns == index.columns(),
                "restore_backward_units: row ", r + 1, ": the rebuilt index has ", units.key_lists, " key lists, ",
                units.column_lists, " column lists, ", units.column_items, " column items and ", index.columns(),
                " columns, the record ", m.key_lists, ", ", m.column_lists, ", ", m.column_items, " and ", m.columns);
      }
      m.key_lists = units.key_lists;
      m.column_lists = units.column_lists;
      m.column_items = units.column_items;
      m.columns = index.columns();
      m.longest_key_list = units.longest_key_list;
      if (m.columns_per_list < 0) m.columns_per_list = m.chunks_per_list * m.block_k;
    }
  }
}

bool launch_under_filled(const KernelMeasurement& m, int64_t sm_count) {
  const int64_t slots = 4 * sm_count;  // two waves of two CTAs per SM
  if (m.direction == "forward") {
    const int64_t ctas_per_list = m.block_q % 128 == 0 ? m.block_q / 128 : std::max<int64_t>(m.block_q / 64, 1);
    return m.lists * ctas_per_list < slots;
  }
  const int64_t block_k = std::max<int64_t>(m.block_k, 64);
  const int64_t key_blocks = (m.local_tokens + block_k - 1) / block_k;
  return int64_t{m.kv_heads} * key_blocks * (block_k / 64) < slots;
}

int64_t launched_key_blocks(const KernelMeasurement& m) {
  return LaunchGeometry{.kv_heads = m.kv_heads, .chunk_tokens = m.local_tokens, .block_k = std::max<int32_t>(m.block_k, 1)}
      .key_blocks();
}

bool lists_part_of_the_chunk(const KernelMeasurement& m) {
  return m.key_lists > 0 && 2 * m.key_lists <= launched_key_blocks(m);
}

std::vector<ShapeFit> fit_kernel_measurements(std::vector<KernelMeasurement>& kernels, const FitOptions& options) {
  std::vector<KernelShape> shapes;
  for (const KernelMeasurement& k : kernels) {
    if (std::find(shapes.begin(), shapes.end(), shape_of(k)) == shapes.end()) shapes.push_back(shape_of(k));
  }
  require(!shapes.empty(), "no kernel measurements to fit");
  std::vector<ShapeFit> fits;
  for (const KernelShape& shape : shapes) {
    fits.push_back({shape, fit_direction(kernels, shape, "forward", options), fit_direction(kernels, shape, "backward", options)});
  }
  return fits;
}

CalibratedShape calibrated_shape(const ShapeFit& fit) {
  CalibratedShape s;
  s.shape = fit.shape;
  s.forward = fit.forward.fit.coefficients;
  s.backward = fit.backward.fit.coefficients;
  const DirectionFit& f = fit.forward;
  const DirectionFit& b = fit.backward;
  CalibrationFit stats;
  stats.samples = f.fit.samples + b.fit.samples;
  stats.median_relative_error = worse(f.fit.median_relative_error, b.fit.median_relative_error);
  stats.max_relative_error = worse(f.fit.max_relative_error, b.fit.max_relative_error);
  stats.heldout_median_relative_error = worse(f.heldout.median_relative_error, b.heldout.median_relative_error);
  stats.heldout_max_relative_error = worse(f.heldout.max_relative_error, b.heldout.max_relative_error);
  stats.folds = f.heldout.folds;
  stats.dealings = f.heldout.dealings;
  s.fit = stats;
  return s;
}

std::vector<KernelMeasurement> parse_kernel_measurements_csv(const std::string& text, std::string_view source_name) {
  static constexpr const char* kRequired[] = {"direction", "q_heads", "kv_heads", "local_tokens", "block_q", "block_k",
                                              "head_dim", "tiles_per_list", "chunks_per_list", "lists", "tiles",
                                              "column_chunks", "repeats", "median_us", "min_us", "max_us",
                                              "under_filled"};
  CsvRows rows(text, source_name, kRequired);
  std::vector<KernelMeasurement> result;
  while (rows.next()) {
    const auto int32 = [&](const char* name) { return static_cast<int32_t>(rows.integer(name, int64_t{1} << 30)); };
    KernelMeasurement m;
    m.direction = rows.cell("direction");
    require(m.direction == "forward" || m.direction == "backward", rows.where(),
            ": column direction must be forward or backward, got \"", m.direction.substr(0, 32), "\"");
    m.q_heads = int32("q_heads");
    m.kv_heads = int32("kv_heads");
    m.local_tokens = rows.integer("local_tokens");
    m.block_q = int32("block_q");
    m.block_k = int32("block_k");
    m.head_dim = int32("head_dim");
    m.tiles_per_list = int32("tiles_per_list");
    m.chunks_per_list = int32("chunks_per_list");
    m.lists = rows.integer("lists");
    m.tiles = rows.integer("tiles");
    m.column_chunks = rows.integer("column_chunks");
    m.repeats = int32("repeats");
    m.median_us = rows.number("median_us");
    m.min_us = rows.number("min_us");
    m.max_us = rows.number("max_us");
    m.under_filled = rows.integer("under_filled") != 0;
    if (rows.has("placement")) m.placement = rows.cell("placement");  // absent in the first H100 data: random
    if (rows.has("key_block_stride")) {  // absent before strides: every key block
      m.key_block_stride = int32("key_block_stride");
      require(m.key_block_stride >= 1, rows.where(), ": column key_block_stride must be >= 1, got ", m.key_block_stride);
    }
    // Absent before the backward's units were recorded; -1 = not recorded.
    const auto optional_integer = [&](const char* name, int64_t most = INT64_MAX) -> int64_t {
      if (!rows.has(name) || rows.cell(name) == "-1") return -1;
      return rows.integer(name, most);
    };
    m.columns_per_list = static_cast<int32_t>(optional_integer("columns_per_list", int64_t{1} << 30));
    m.key_lists = optional_integer("key_lists");
    m.column_lists = optional_integer("column_lists");
    m.column_items = optional_integer("column_items");
    m.columns = optional_integer("columns");
    m.longest_key_list = optional_integer("longest_key_list");
    if (rows.has("key_pass_us") && rows.cell("key_pass_us") != "-1") m.key_pass_us = rows.number("key_pass_us");
    if (rows.has("sm_clock_mhz")) {  // absent before the clock was probed: 0 = not measured
      m.sm_clock_mhz = rows.number("sm_clock_mhz");
      require(m.sm_clock_mhz >= 0.0, rows.where(), ": column sm_clock_mhz must be >= 0, got ", m.sm_clock_mhz);
    }
    result.push_back(m);
  }
  return result;
}

}  // namespace sparsering
