// RenderHtml without the plotting libraries (a build whose `npm ci` failed or never ran): the
// report fails with a reason and the way to get them, never an empty or broken page.
#include <gtest/gtest.h>

#include "analysis/html_assets.h"
#include "analysis/report_html.h"

namespace iotwin::analysis {
namespace {

TEST(ReportHtml, WithoutPlottingLibrariesSaysWhyAndHowToGetThem) {
  HtmlAssets assets;  // plotting_available = false
  assets.missing_reason = "npm is not installed";
  auto html = RenderHtml(nlohmann::json::object(), assets);
  ASSERT_FALSE(html.ok());
  EXPECT_EQ(html.status().code(), Status::Code::kUnsupported);
  const std::string& m = html.status().message();
  EXPECT_NE(m.find("npm is not installed"), std::string::npos) << m;
  EXPECT_NE(m.find("npm ci --prefix web"), std::string::npos) << m;
  EXPECT_NE(m.find("vega"), std::string::npos) << m;
}

TEST(ReportHtml, WithoutAReasonNamesTheMissingFolder) {
  auto html = RenderHtml(nlohmann::json::object(), HtmlAssets{});
  ASSERT_FALSE(html.ok());
  EXPECT_NE(html.status().message().find("web/node_modules was missing"), std::string::npos);
}

TEST(ReportHtml, WithPlottingLibrariesInlinesThem) {
  HtmlAssets assets;
  assets.plotting_available = true;
  assets.vega = "/*VEGA-MARK*/";
  assets.vega_lite = "/*VEGA-LITE-MARK*/";
  assets.vega_embed = "/*VEGA-EMBED-MARK*/";
  assets.versions = "vega 0, vega-lite 0, vega-embed 0";
  auto html = RenderHtml(nlohmann::json::object(), assets);
  ASSERT_TRUE(html.ok()) << html.status().message();
  for (const char* mark : {"/*VEGA-MARK*/", "/*VEGA-LITE-MARK*/", "/*VEGA-EMBED-MARK*/"}) {
    EXPECT_NE(html->find(mark), std::string::npos) << mark;
  }
}

}  // namespace
}  // namespace iotwin::analysis
