// Weighted least squares with Eigen: dividing each row [1, lists, tiles, chunks, ...] and its
// right-hand side by the measured time (and multiplying both by the square root of the sample's
// weight) turns the weighted squared relative error into an ordinary least-squares problem.
// Non-negativity by a small active set: at most ten coefficients, so pinning the most negative one
// and refitting converges in at most ten rounds.
#include "measure/calibration/kernel_fit.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <array>
#include <cmath>

#include "common/error.hpp"
#include "common/median.hpp"
#include "measure/calibration/link_fit.hpp"

namespace sparsering {
namespace {

// launch, list, tile, chunk, key list, column list, column item, column, key block, critical entry
constexpr int kTerms = 10;

std::array<double, kTerms> features(const KernelSample& s) {
  return {1.0,
          static_cast<double>(s.lists),
          static_cast<double>(s.tiles),
          static_cast<double>(s.column_chunks),
          static_cast<double>(s.key_lists),
          static_cast<double>(s.column_lists),
          static_cast<double>(s.column_items),
          static_cast<double>(s.columns),
          static_cast<double>(s.key_blocks),
          s.critical_entries};
}

KernelCostCoefficients coefficients_of(const std::array<double, kTerms>& beta) {
  KernelCostCoefficients c;
  c.launch_us = std::max(beta[0], 0.0);
  c.per_list_us = std::max(beta[1], 0.0);
  c.per_tile_us = std::max(beta[2], 0.0);
  c.per_vertical_chunk_us = std::max(beta[3], 0.0);
  c.per_key_list_us = std::max(beta[4], 0.0);
  c.per_column_list_us = std::max(beta[5], 0.0);
  c.per_column_item_us = std::max(beta[6], 0.0);
  c.per_column_us = std::max(beta[7], 0.0);
  c.per_key_block_us = std::max(beta[8], 0.0);
  c.per_critical_entry_us = std::max(beta[9], 0.0);
  return c;
}

void check_samples(std::span<const KernelSample> samples) {
  for (size_t k = 0; k < samples.size(); ++k) {
    const KernelSample& s = samples[k];
    require(std::isfinite(s.time_us) && s.time_us > 0.0, "kernel sample ", k, ": time_us must be finite and > 0, got ",
            s.time_us);
    require(std::isfinite(s.weight) && s.weight >= 0.0, "kernel sample ", k, ": weight must be finite and >= 0, got ",
            s.weight);
    require(s.tiles >= 0 && s.column_chunks >= 0 && s.lists >= 0 && s.key_lists >= 0 && s.column_lists >= 0 &&
                s.column_items >= 0 && s.columns >= 0 && s.key_blocks >= 0 && std::isfinite(s.critical_entries) &&
                s.critical_entries >= 0.0,
            "kernel sample ", k, ": negative counts (", s.lists, " lists, ", s.tiles, " tiles, ", s.column_chunks,
            " chunks, ", s.key_lists, " key lists, ", s.column_lists, " column lists, ", s.column_items,
            " column items, ", s.columns, " columns, ", s.key_blocks, " key blocks, ", s.critical_entries,
            " critical entries)");
  }
}

}  // namespace

double predict_kernel_us(const KernelCostCoefficients& c, int64_t lists, int64_t tiles, int64_t column_chunks) {
  return c.launch_us + c.per_list_us * static_cast<double>(lists) + c.per_tile_us * static_cast<double>(tiles) +
         c.per_vertical_chunk_us * static_cast<double>(column_chunks);
}

double predict_kernel_us(const KernelCostCoefficients& c, const KernelSample& s) {
  return predict_kernel_us(c, s.lists, s.tiles, s.column_chunks) + c.per_key_list_us * static_cast<double>(s.key_lists) +
         c.per_column_list_us * static_cast<double>(s.column_lists) +
         c.per_column_item_us * static_cast<double>(s.column_items) + c.per_column_us * static_cast<double>(s.columns) +
         c.per_key_block_us * static_cast<double>(s.key_blocks) + c.per_critical_entry_us * s.critical_entries;
}

std::pair<double, double> median_and_max_magnitude(std::span<const double> values) {
  return median_and_max_magnitude(values, std::vector<double>(values.size(), 1.0));
}

std::pair<double, double> median_and_max_magnitude(std::span<const double> values, std::span<const double> weights) {
  require(values.size() == weights.size(), "error summary: ", values.size(), " values but ", weights.size(), " weights");
  std::vector<double> magnitudes;
  double largest = 0.0;
  for (const double v : values) {
    magnitudes.push_back(std::abs(v));
    largest = std::max(largest, std::abs(v));
  }
  return {weighted_median(magnitudes, std::vector<double>(weights.begin(), weights.end())), largest};
}

KernelFit evaluate_kernel_cost(const KernelCostCoefficients& c, std::span<const KernelSample> samples) {
  check_samples(samples);
  KernelFit fit;
  fit.coefficients = c;
  fit.samples = static_cast<int64_t>(samples.size());
  if (samples.empty()) return fit;
  double mean = 0.0;
  for (const KernelSample& s : samples) mean += s.time_us;
  mean /= static_cast<double>(samples.size());
  double ss_res = 0.0;
  double ss_tot = 0.0;
  for (const KernelSample& s : samples) {
    const double predicted = predict_kernel_us(c, s);
    fit.relative_errors.push_back((predicted - s.time_us) / s.time_us);
    ss_res += (predicted - s.time_us) * (predicted - s.time_us);
    ss_tot += (s.time_us - mean) * (s.time_us - mean);
  }
  std::vector<double> weights;
  for (const KernelSample& s : samples) weights.push_back(s.weight);
  std::tie(fit.median_relative_error, fit.max_relative_error) = median_and_max_magnitude(fit.relative_errors, weights);
  fit.r_squared = ss_tot > 0.0 ? 1.0 - ss_res / ss_tot : (ss_res == 0.0 ? 1.0 : 0.0);
  return fit;
}

KernelFit fit_kernel_cost(std::span<const KernelSample> samples, const KernelTerms& terms) {
  check_samples(samples);
  std::vector<KernelSample> weighted;
  for (const KernelSample& s : samples) {
    if (s.weight > 0.0) weighted.push_back(s);
  }
  require(weighted.size() >= 3, "the kernel cost fit needs at least 3 samples of positive weight, got ", weighted.size());
  require(terms.tile, "the kernel cost fit needs its per-tile term");
  std::array<bool, kTerms> free{true};  // the launch term; the others where some sample has their count
  for (const KernelSample& s : weighted) {
    free[1] = free[1] || (terms.list && s.lists > 0);
    free[2] = free[2] || s.tiles > 0;
    free[3] = free[3] || (terms.chunk && s.column_chunks > 0);
    free[4] = free[4] || (terms.key_list && s.key_lists > 0);
    free[5] = free[5] || (terms.column_list && s.column_lists > 0);
    free[6] = free[6] || (terms.column_item && s.column_items > 0);
    free[7] = free[7] || (terms.column && s.columns > 0);
    free[8] = free[8] || (terms.key_block && s.key_blocks > 0);
    free[9] = free[9] || (terms.critical && s.critical_entries > 0.0);
  }
  require(free[2], "the kernel cost fit needs at least one sample with a tile");

  std::array<double, kTerms> beta{};
  for (int round = 0; round < kTerms; ++round) {
    std::vector<int> columns;
    for (int t = 0; t < kTerms; ++t) {
      if (free[static_cast<size_t>(t)]) columns.push_back(t);
    }
    const auto rows = static_cast<Eigen::Index>(weighted.size());
    Eigen::MatrixXd a(rows, static_cast<Eigen::Index>(columns.size()));
    Eigen::VectorXd b(rows);
    for (Eigen::Index r = 0; r < rows; ++r) {
      const KernelSample& s = weighted[static_cast<size_t>(r)];
      const std::array<double, kTerms> f = features(s);
      const double root = std::sqrt(s.weight);  // exactly 1 for weight 1: unweighted fits as before
      for (size_t c = 0; c < columns.size(); ++c) {
        a(r, static_cast<Eigen::Index>(c)) = f[static_cast<size_t>(columns[c])] / s.time_us * root;
      }
      b(r) = root;
    }
    const Eigen::VectorXd x = a.colPivHouseholderQr().solve(b);
    beta = {};
    int most_negative = -1;
    for (size_t c = 0; c < columns.size(); ++c) {
      const double value = x(static_cast<Eigen::Index>(c));
      beta[static_cast<size_t>(columns[c])] = value;
      if (value < 0.0 && (most_negative < 0 || value < beta[static_cast<size_t>(most_negative)])) most_negative = columns[c];
    }
    if (most_negative < 0) break;
    free[static_cast<size_t>(most_negative)] = false;
    beta[static_cast<size_t>(most_negative)] = 0.0;
  }
  const KernelCostCoefficients c = coefficients_of(beta);
  require(c.per_tile_us > 0.0, "the kernel cost fit found no positive cost per tile (the tile counts do not explain the times)");
  return evaluate_kernel_cost(c, samples);
}

KernelCostCoefficients rounded_coefficients(const KernelCostCoefficients& c) {
  KernelCostCoefficients r;
  r.launch_us = round_significant(c.launch_us, 4);
  r.per_list_us = round_significant(c.per_list_us, 4);
  r.per_tile_us = round_significant(c.per_tile_us, 4);
  r.per_vertical_chunk_us = round_significant(c.per_vertical_chunk_us, 4);
  r.per_key_list_us = round_significant(c.per_key_list_us, 4);
  r.per_column_list_us = round_significant(c.per_column_list_us, 4);
  r.per_column_item_us = round_significant(c.per_column_item_us, 4);
  r.per_column_us = round_significant(c.per_column_us, 4);
  r.per_key_block_us = round_significant(c.per_key_block_us, 4);
  r.per_critical_entry_us = round_significant(c.per_critical_entry_us, 4);
  return r;
}

}  // namespace sparsering
