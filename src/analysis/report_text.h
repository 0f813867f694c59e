// Renders the report model (Analyzer::Model) as text tables for a terminal (≤ 100 columns, ASCII).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace iotwin::analysis {

std::string RenderText(const nlohmann::json& model);

// Formatting helpers shared by the text outputs of report and compare.
std::string FormatCount(uint64_t v);                // 1,234,567
std::string FormatBytes(double v);                  // 128 KiB, 1.5 MiB, 512 B
std::string FormatDuration(double ns);              // 850ns, 12.3us, 1.23ms, 4.567s
std::string FormatPercent(double share);            // 93.7%
std::string Truncate(const std::string& s, size_t width);  // keeps the tail: "...ong/path"

}  // namespace iotwin::analysis
