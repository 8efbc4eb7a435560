// How one config file names another (a cluster its GPU, a plan its model and cluster): either a
// bare name, looked up in the sibling kind folder (configs/clusters/x.yaml names `h100-sxm`, read
// from configs/gpus/h100-sxm.yaml), or a path, relative to the referring file. Tested in
// tests/config/config_ref_test.cpp.
#pragma once

#include <filesystem>
#include <string_view>

namespace sparsering {

/// True if `ref` is a path (contains '/' or ends in ".yaml", ".yml" or ".json", a Hugging Face
/// config.json) rather than a bare name.
bool is_path_ref(std::string_view ref);

/// Resolves `ref` as written in `referring_file`: a path is taken relative to the referring
/// file's folder (absolute paths stay); a bare name becomes
/// <referring file's folder>/../<kind_folder>/<ref>.yaml. The result is lexically normalised.
/// Throws InputError when `ref` is empty.
std::filesystem::path resolve_config_ref(std::string_view ref, const std::filesystem::path& referring_file,
                                         std::string_view kind_folder);

}  // namespace sparsering
