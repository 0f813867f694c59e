// `iotwin report --html` in a real headless Chromium: the page renders every chart, offline, with
// no console errors. Needs the Debian packages chromium (+ chromium-driver for other tools); with
// IOTWIN_REQUIRE_BPF=1 (CI) a missing browser fails the test instead of skipping it.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "../unit/trace_builder.h"
#include "runtime_util.h"

namespace iotwin::test {
namespace {

constexpr uint32_t kDev = (8u << 20) | 1;
constexpr uint64_t kT0 = 1'000'000'000ULL;

std::string FindBrowser() {
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    std::stringstream ss(dirs);
    std::string dir;
    while (std::getline(ss, dir, ':')) {
      std::string p = dir + "/" + name;
      if (access(p.c_str(), X_OK) == 0) return p;
    }
  }
  return "";
}

// Every layer the report can plot: syscalls, faults, page cache, block, async, intents, and a
// file name that tries to inject markup.
TraceBuilder EveryLayer() {
  TraceBuilder t(FullCaptureMeta());
  uint64_t ts = kT0 + 1000;
  t.ProcAt(IOT_PROC_START, ts, 10, 10, "trainer");
  t.Open(10, ts += 1000, "/data/</script><b>evil</b>.bin", 3, kDev, 1);
  t.Open(10, ts += 1000, "/ckpt/model.pt", 4, kDev, 2, O_WRONLY | O_CREAT);
  t.Open(10, ts += 1000, "/swap/kv", 5, kDev, 3, O_RDWR | O_DIRECT);
  const uint32_t disk = 253u << 20;
  t.Intent(IOT_INTENT_BEGIN, ts, 10, "epoch 0");
  for (int i = 0; i < 3000; i++) {
    ts += 10'000 + (i % 7) * 1000;
    t.Io(IOT_OP_PREAD64, 10, ts, 30'000 + (i % 13) * 2000, 3, kDev, 1,
         uint64_t(i % 500) * 131072 + (i % 3 ? 0 : 1 << 20), i % 10 ? 131072 : 4096,
         i % 10 ? 131072 : 4096);
    if (i % 30 == 0) t.Io(IOT_OP_WRITE, 10, ts + 10, 200'000, 4, kDev, 2, 0, 1 << 20, 1 << 20);
    if (i % 5 == 0) {
      t.BlockAt(IOT_BLK_QUEUE, ts + 100, disk, uint64_t(i) * 256, 131072, IOT_BLKF_READ, 0);
      t.BlockAt(IOT_BLK_ISSUE, ts + 900, disk, uint64_t(i) * 256, 131072, IOT_BLKF_READ, 1000 + i);
      t.BlockAt(IOT_BLK_COMPLETE, ts + 90'000, disk, uint64_t(i) * 256, 131072, IOT_BLKF_READ, 1000 + i);
    }
    if (i % 11 == 0) t.FaultAt(ts + 50, 10, kDev, 1, uint64_t(i % 300), i % 3 == 0);
    if (i % 17 == 0) t.PageCacheAt(IOT_PC_ADD, ts + 60, kDev, 1, uint64_t(i), 32);
    if (i % 50 == 0) {
      t.AsyncAt(IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, 22, ts + 70, 10, 5, 9000 + i, uint64_t(i) << 20,
              1 << 20, 0);
      t.AsyncAt(IOT_AIO_ENGINE_URING, IOT_AIO_COMPLETE, 22, ts + 700'000, 10, 5, 9000 + i, 0, 0, 1 << 20);
    }
  }
  // Every power-of-two size from 1 B to 64 MiB, read and written: the widest size charts.
  for (int k = 0; k <= 26; k++) {
    t.Io(IOT_OP_PREAD64, 10, ts += 1000, 20'000, 3, kDev, 1, 0, 1ULL << k, 1ULL << k);
    t.Io(IOT_OP_WRITE, 10, ts += 1000, 20'000, 4, kDev, 2, 0, 1ULL << k, 1ULL << k);
    t.Io(IOT_OP_READ, 10, ts += 1000, 20'000, 5, kDev, 3, 0, 1ULL << k, 1ULL << k);
    t.BlockAt(IOT_BLK_ISSUE, ts, disk, uint64_t(k) << 20, 512ULL << (k % 14), IOT_BLKF_READ, 5000 + k);
    t.BlockAt(IOT_BLK_COMPLETE, ts + 500, disk, uint64_t(k) << 20, 512ULL << (k % 14), IOT_BLKF_READ, 5000 + k);
  }
  t.Intent(IOT_INTENT_END, ts, 10, "epoch 0");
  t.Intent(IOT_INTENT_BEGIN, ts += 1'000'000, 10, "save");
  t.Io(IOT_OP_WRITE, 10, ts += 1000, 200'000, 4, kDev, 2, 0, 1 << 20, 1 << 20);
  t.Intent(IOT_INTENT_END, ts += 5'000'000, 10, "save");
  return t;
}

TEST(HtmlReport, RendersAllChartsInHeadlessChromiumWithoutErrors) {
  std::string browser = FindBrowser();
  if (browser.empty()) {
    if (BpfRequired()) FAIL() << "chromium is not installed (apt-get install chromium chromium-driver)";
    GTEST_SKIP() << "chromium is not installed";
  }
  TempDir dir;
  std::string trace = dir / "t.iotwin", html = dir / "report.html";
  ASSERT_TRUE(EveryLayer().WriteFile(trace, {{"stop_reason", "exited"}, {"exit_status", 0}}).ok());
  RunResult r = test::Run({IotwinBin(), "report", trace, "--html", html, "--no-progress"});
  if (r.exit_code == 2 && r.err.find("without the plotting libraries") != std::string::npos) {
    if (BpfRequired()) FAIL() << r.err;
    GTEST_SKIP() << r.err;
  }
  ASSERT_EQ(r.exit_code, 0) << r.err;

  std::ifstream in(html);
  std::string page((std::istreambuf_iterator<char>(in)), {});
  // Self-contained: no network references to scripts or styles.
  EXPECT_EQ(page.find("<script src"), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
  // The hostile path is data, not markup.
  EXPECT_EQ(page.find("</script><b>evil"), std::string::npos);

  std::string profile = dir / "profile";
  RunResult b = test::Run(
      {browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
       "--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + profile,
       "--enable-logging=stderr", "--v=0", "--virtual-time-budget=20000", "--window-size=1280,900",
       "--dump-dom",
       "file://" + html},
      180);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const std::string& dom = b.out;

  // The page counted its charts and marked them rendered.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dom, m, std::regex("data-charts=\"(\\d+)\""))) << dom.substr(0, 2000);
  int charts = std::stoi(m[1]);
  ASSERT_TRUE(std::regex_search(dom, m, std::regex("data-rendered=\"(\\d+)\"")))
      << "charts never finished rendering";
  EXPECT_EQ(std::stoi(m[1]), charts);
  // Plots for every layer in the trace: time series (3), sizes (3), pattern (2), heat map +
  // scatter per busy file (2 x 3), latency (1).
  EXPECT_GE(charts, 14);
  // Each chart container holds an <svg>.
  std::regex container("<div[^>]*class=\"chart[ \"][^>]*id=\"(chart-\\d+)\"[^>]*>");
  int with_svg = 0, containers = 0;
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), container); it != std::sregex_iterator(); ++it) {
    ++containers;
    size_t start = static_cast<size_t>(it->position() + it->length());
    size_t next = dom.find("class=\"chart-box\"", start);
    std::string inside = dom.substr(start, (next == std::string::npos ? dom.size() : next) - start);
    if (inside.find("<svg") != std::string::npos) ++with_svg;
    else ADD_FAILURE() << (*it)[1] << " has no <svg>";
  }
  EXPECT_EQ(containers, charts);
  EXPECT_EQ(with_svg, charts);
  // Every chart fits its card in a 1280-pixel window (the page measures each rendered chart).
  if (std::regex_search(dom, m, std::regex("data-overflow=\"([^\"]*)\""))) {
    ADD_FAILURE() << "charts wider than their card: " << m[1];
  }
  // No errors: none caught by the page, none in the browser's console log.
  EXPECT_EQ(dom.find("data-errors="), std::string::npos) << dom.substr(dom.find("iotwin-errors"), 2000);
  std::istringstream log(b.err);
  std::string line;
  while (std::getline(log, line)) {
    if (line.find("CONSOLE") != std::string::npos) ADD_FAILURE() << "console message: " << line;
  }
  // Phases shade the time plots: a band per phase (two here) in each of them.
  int band_groups = 0;
  for (size_t at = dom.find("phase_bands_marks"); at != std::string::npos;
       at = dom.find("phase_bands_marks", at + 1)) {
    ++band_groups;
    const std::string group = dom.substr(at, dom.find("</g>", at) - at);
    int bands = 0;
    for (size_t p = group.find("<path"); p != std::string::npos; p = group.find("<path", p + 1)) ++bands;
    EXPECT_EQ(bands, 2) << group.substr(0, 1000);
  }
  EXPECT_EQ(band_groups, 3) << "IOPS, throughput and major faults each shade the phases";
  // A path in the right-to-left Files column is held left-to-right by marks (U+200E) around it,
  // so that "/ckpt/model.pt" does not show as "ckpt/model.pt/".
  EXPECT_NE(dom.find("\u200e/ckpt/model.pt\u200e"), std::string::npos);
  // The dominant-size statement and the hostile file name appear as text.
  EXPECT_NE(dom.find("128 KiB"), std::string::npos);
  EXPECT_NE(dom.find("&lt;/script&gt;&lt;b&gt;evil"), std::string::npos);
}

}  // namespace
}  // namespace iotwin::test
