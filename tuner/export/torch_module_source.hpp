// The text of tuner/python/sparsering_plan.py, compiled into the library (tuner/CMakeLists.txt
// generates the definition) so that `sparsering export --to torch` can copy the module beside
// plan.json. Tested in tests/tuner/torch_export_test.cpp.
#pragma once

#include <string_view>

namespace sparsering {

/// The Python module's source, byte for byte.
std::string_view torch_module_source();

}  // namespace sparsering
