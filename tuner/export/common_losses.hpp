// Loss and note sentences that several exporters share (sparse attention, ZeRO stage, layouts), so
// that every target words the same loss the same way. Tested through the exporter tests in
// tests/tuner/framework_exports_test.cpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "sim/config/plan_config.hpp"

namespace sparsering {

/// For a plan with sparse attention enabled: the target computes dense causal attention, so the
/// dynamic sparse settings are lost. std::nullopt for a dense plan.
std::optional<std::string> dense_attention_loss(const PlanConfig& plan, std::string_view framework);

/// For a plan whose token layout is not zigzag, in a framework whose causal ring kernel and data
/// loader only know zigzag: what is lost and that zigzag is written instead. std::nullopt for zigzag.
std::optional<std::string> zigzag_only_loss(const PlanConfig& plan, std::string_view framework);

/// "striped (granularity 64 tokens)", "zigzag", "contiguous".
std::string layout_text(const TokenLayout& layout);

/// The plan's name, or its file name, or "plan".
std::string plan_label(const PlanConfig& plan);

}  // namespace sparsering
