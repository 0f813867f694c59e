// A trace's header metadata and footer summary are untrusted JSON: every consumer reads them
// through base/json_fields.h, so a value of another type, or a parent that is not an object,
// reads as absent instead of throwing nlohmann::type_error out of the command.
#include <gtest/gtest.h>

#include <string>

#include "analysis/analyzer.h"
#include "analysis/compare.h"
#include "analysis/report_text.h"
#include "trace_builder.h"
#include "base/json_fields.h"
#include "correlate/correlate.h"
#include "correlate/layers_report.h"
#include "interop_test_util.h"

namespace iotwin {
namespace {

using nlohmann::json;

TEST(JsonFields, PathsMissingKeysAndOtherTypesGiveTheDefault) {
  const json j = {{"a",
                   {{"b", true},
                    {"n", 7},
                    {"neg", -1},
                    {"big", 1ull << 40},
                    {"f", 1.5},
                    {"s", "x"},
                    {"null", nullptr}}},
                  {"arr", {1, 2}}};
  EXPECT_TRUE(json_fields::GetBool(j, "a/b", false));
  EXPECT_FALSE(json_fields::GetBool(j, "a/n", false));    // a number is not a bool
  EXPECT_TRUE(json_fields::GetBool(j, "a/null", true));   // null is absent
  EXPECT_FALSE(json_fields::GetBool(j, "a/b/c", false));  // parent not an object
  EXPECT_FALSE(json_fields::GetBool(j, "arr/0", false));  // arrays are not paths
  EXPECT_EQ(json_fields::GetString(j, "a/s"), "x");
  EXPECT_EQ(json_fields::GetString(j, "a/n", "d"), "d");
  EXPECT_EQ(json_fields::GetUint(j, "a/n", 0), 7u);
  EXPECT_EQ(json_fields::GetUint(j, "a/neg", 3), 3u);  // negative
  EXPECT_EQ(json_fields::GetUint(j, "a/f", 3), 3u);    // not an integer
  EXPECT_EQ(json_fields::GetUint(j, "a/s", 3), 3u);
  EXPECT_EQ(json_fields::GetUint32(j, "a/big", 9), 9u);  // past 32 bits
  EXPECT_EQ(json_fields::GetUint32(j, "a/n", 9), 7u);
  EXPECT_EQ(json_fields::GetDouble(j, "a/f", 0), 1.5);
  EXPECT_EQ(json_fields::GetDouble(j, "a/s", 2), 2.0);
  EXPECT_NE(json_fields::Object(j, "a"), nullptr);
  EXPECT_EQ(json_fields::Object(j, "arr"), nullptr);
  EXPECT_NE(json_fields::Array(j, "arr"), nullptr);
  EXPECT_EQ(json_fields::Find(json(5), "a"), nullptr);
  EXPECT_EQ(json_fields::Find(j, "a/zz"), nullptr);
}

// report: CAPTURE lists each layer; a header's "enabled" that is not a bool reads as off.
TEST(UntrustedHeader, ReportLayerEnabledNotBoolIsOff) {
  json meta = test::FullCaptureMeta();
  meta["layers"]["block"]["enabled"] = "yes";
  meta["layers"]["memory"] = 3;  // not an object at all
  analysis::Analyzer a;
  a.SetMeta(meta);
  json summary = {{"lost", {{"block", -5}, {"nvme", 1e300}, {"sched", "many"}}}};
  std::string text;
  ASSERT_NO_THROW(text = analysis::RenderText(a.Model(summary, json::object())));
  EXPECT_NE(text.find("block off"), std::string::npos) << text;
  EXPECT_NE(text.find("memory off"), std::string::npos) << text;
  EXPECT_NE(text.find("syscall on"), std::string::npos) << text;
  EXPECT_NE(text.find("  lost       none"), std::string::npos) << text;  // no count is valid
}

// report: a footer duration that is not a count is not copied into the model.
TEST(UntrustedHeader, ReportDurationNotACountIsTheSpan) {
  analysis::Analyzer a;
  a.SetMeta(test::FullCaptureMeta());
  json model = a.Model(json{{"duration_ns", "long"}}, json::object());
  EXPECT_TRUE(model["capture"]["duration_ns"].is_number_unsigned()) << model["capture"].dump();
}

correlate::Correlation CorrelateWithMeta(const json& meta) {
  correlate::Correlator c;
  c.SetMeta(meta, json{{"lost", {{"block", "x"}, {"nvme", -2}}}});
  return c.Finish();
}

// layers: the header's layers are listed; "enabled" of another type, or a layer that is not an
// object, reads as off.
TEST(UntrustedHeader, LayersMetaLayerEnabledNotBoolIsOff) {
  json meta = test::FullCaptureMeta();
  meta["layers"]["block"]["enabled"] = nullptr;
  meta["layers"]["nvme"] = "on";
  correlate::Correlation c;
  ASSERT_NO_THROW(c = CorrelateWithMeta(meta));
  EXPECT_FALSE(c.block_layer);
  EXPECT_FALSE(c.nvme_layer);
  EXPECT_EQ(c.lost_block, 0u);
  EXPECT_EQ(c.lost_nvme, 0u);
  std::string text;
  ASSERT_NO_THROW(text = correlate::RenderLayersText(correlate::LayersReport(c)));
  EXPECT_NE(text.find("  block   off"), std::string::npos) << text;
  EXPECT_NE(text.find("  nvme    off"), std::string::npos) << text;
}

// layers: block_devices entries whose dev is not "major:minor" or whose limits are not counts.
TEST(UntrustedHeader, LayersBlockDevicesDevNotStringIsSkipped) {
  json meta = test::FullCaptureMeta();
  meta["block_devices"] = {{"a", {{"dev", 259}}},
                           {"b",
                            {{"dev", "259:0"},
                             {"max_sectors_kb", "128"},
                             {"max_segments", -1},
                             {"logical_block_size", 1e30}}},
                           {"c", "not an object"},
                           {"d", {{"dev", "99999:1"}}}};
  correlate::Correlation c = CorrelateWithMeta(meta);
  ASSERT_NO_THROW((void)correlate::RenderLayersText(correlate::LayersReport(c)));
  meta["block_devices"] = 12;
  c = CorrelateWithMeta(meta);
  ASSERT_NO_THROW((void)correlate::LayersReport(c));
}

// layers: layers.pmu that is not an object leaves the hardware counters "unavailable".
TEST(UntrustedHeader, LayersPmuNotObjectIsUnavailable) {
  json meta = test::FullCaptureMeta();
  meta["layers"]["pmu"] = 7;
  correlate::Correlation c = CorrelateWithMeta(meta);
  json r;
  ASSERT_NO_THROW(r = correlate::LayersReport(c));
  EXPECT_EQ(r["interference"]["pmu"].get<std::string>().rfind("unavailable", 0), 0u)
      << r["interference"].dump();
  ASSERT_NO_THROW((void)correlate::RenderLayersText(r));
  meta["layers"]["pmu"] = {{"reason", 5}};
  c = CorrelateWithMeta(meta);
  ASSERT_NO_THROW(r = correlate::LayersReport(c));
  EXPECT_EQ(r["interference"]["pmu"], "");
}

// compare: the replay's header names its source and pace; other types read as unknown.
TEST(UntrustedHeader, CompareReplaySourceNotStringIsUnknown) {
  interop::testing::ScratchDir dir;
  const std::string orig = dir / "orig.iotwin", rep = dir / "rep.iotwin";
  test::TraceBuilder o(test::FullCaptureMeta());
  o.Open(7, 2'000'000'000, "/data/f", 3, 0x800001, 42);
  ASSERT_TRUE(o.WriteFile(orig, json::object()).ok());
  json meta = test::FullCaptureMeta();
  meta["replay"] = {{"source", 5}, {"pace", {"as", "recorded"}}};
  test::TraceBuilder r(meta);
  r.Open(7, 2'000'000'000, "/data/f", 3, 0x800001, 42);
  ASSERT_TRUE(r.WriteFile(rep, json::object()).ok());
  auto result = analysis::CompareTraces(orig, rep, analysis::CompareOptions{});
  ASSERT_TRUE(result.ok()) << result.status().message();
  std::string text;
  ASSERT_NO_THROW(text = analysis::RenderCompareText(*result));
  EXPECT_NE(text.find("replay of ?, pace ?"), std::string::npos) << text;
}

}  // namespace
}  // namespace iotwin
