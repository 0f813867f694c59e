// Renders the report model as one self-contained HTML page: vega, vega-lite and vega-embed are
// inlined with the model and the page script, so the file opens offline.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace iotwin::analysis {

struct HtmlAssets;

// Fails (kUnsupported) when this binary was built without the plotting libraries.
Result<std::string> RenderHtml(const nlohmann::json& model);
// The same with the given assets instead of those embedded in this binary.
Result<std::string> RenderHtml(const nlohmann::json& model, const HtmlAssets& assets);

// JSON text safe inside a <script> element: '<', '>' and '&' become \u003c, \u003e, \u0026
// (valid JSON: they can only occur inside strings).
std::string JsonForScript(const nlohmann::json& j);

}  // namespace iotwin::analysis
