// Replays fuzz inputs through a fuzz target's LLVMFuzzerTestOneInput without libFuzzer, so that
// the committed corpora and the seed folders run in every build (ctest `<target>_corpus`, labels
// cpu and hostile; tests/fuzz/CMakeLists.txt), the AddressSanitizer build included. Arguments:
// `--max-len N` (optional, as libFuzzer's -max_len: only the first N bytes of an input), then
// files or folders (every regular file inside, recursively, in sorted order). A target reports a
// bug by crashing or aborting, which fails the test; the replay prints how many inputs ran and
// the slowest one.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputs_of(const std::vector<std::string>& roots) {
  std::vector<fs::path> inputs;
  for (const std::string& root : roots) {
    if (fs::is_regular_file(root)) {
      inputs.emplace_back(root);
      continue;
    }
    if (!fs::is_directory(root)) {
      std::cerr << "corpus replay: " << root << " is neither a file nor a folder\n";
      std::exit(2);
    }
    std::vector<fs::path> found;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      if (entry.is_regular_file()) found.push_back(entry.path());
    }
    std::sort(found.begin(), found.end());
    inputs.insert(inputs.end(), found.begin(), found.end());
  }
  return inputs;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> roots(argv + 1, argv + argc);
  size_t max_len = 0;  // 0 = whole inputs
  if (roots.size() >= 2 && roots[0] == "--max-len") {
    max_len = static_cast<size_t>(std::stoull(roots[1]));
    roots.erase(roots.begin(), roots.begin() + 2);
  }
  const std::vector<fs::path> inputs = inputs_of(roots);
  if (inputs.empty()) {
    std::cerr << "corpus replay: no inputs\n";
    return 2;
  }
  double slowest_seconds = 0.0;
  fs::path slowest;
  for (const fs::path& input : inputs) {
    std::ifstream in(input, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    if (max_len > 0 && bytes.size() > max_len) bytes.resize(max_len);
    const auto start = std::chrono::steady_clock::now();
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds >= slowest_seconds) {
      slowest_seconds = seconds;
      slowest = input;
    }
  }
  std::cout << "replayed " << inputs.size() << " inputs; slowest " << slowest.string() << " in " << slowest_seconds
            << " s\n";
  return 0;
}
