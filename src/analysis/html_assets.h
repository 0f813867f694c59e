// Files embedded into the binary for `iotwin report --html`: the plotting libraries (vega,
// vega-lite, vega-embed from web/node_modules, installed by `npm ci --prefix web`) and the
// report page's own script and style sheet (src/analysis/html/).
#pragma once

#include <string_view>

namespace iotwin::analysis {

struct HtmlAssets {
  std::string_view vega;
  std::string_view vega_lite;
  std::string_view vega_embed;
  std::string_view report_js;
  std::string_view report_css;
  bool plotting_available = false;  // false when built without web/node_modules
  std::string_view versions;        // "vega 6.4.0, vega-lite 6.4.1, vega-embed 7.3.0"
  std::string_view missing_reason;  // why they are missing, as configuring found it
};

const HtmlAssets& GetHtmlAssets();

}  // namespace iotwin::analysis
