// libFuzzer target for the sparsity prior reader (traces/sparsity_prior.hpp): parse_sparsity_prior
// on any bytes, and for accepted priors the resampling onto other shapes (fewer and more layers
// and heads), which must give budgets of the requested shape. Bad input must end in InputError;
// anything else is a bug. Built by tests/fuzz/CMakeLists.txt (preset fuzz), seeded with
// configs/sparsity and tests/fuzz/corpus/sparsity_prior_fuzz.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/error.hpp"
#include "traces/sparsity_prior.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sparsering;
  const std::string text(reinterpret_cast<const char*>(data), size);
  SparsityPrior prior;
  try {
    prior = parse_sparsity_prior(text, "fuzz-prior.yaml");
  } catch (const InputError&) {
    return 0;
  }
  if (static_cast<int64_t>(prior.budgets.size()) != prior.layers * prior.q_heads) std::abort();
  const uint64_t seed = size;
  for (const auto& [layers, heads] : {std::pair<int64_t, int64_t>{1, 1}, {3, 5}, {prior.layers, prior.q_heads},
                                      {prior.layers + 2, prior.q_heads * 2}}) {
    const SparsityPrior resampled = resample_prior(prior, layers, heads, seed);
    if (resampled.layers != layers || resampled.q_heads != heads ||
        static_cast<int64_t>(resampled.budgets.size()) != layers * heads) {
      std::abort();
    }
    (void)resampled.at(layers - 1, heads - 1);
  }
  return 0;
}
