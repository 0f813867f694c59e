// The report counts O_DIRECT requests by the open flags' meaning on the traced machine's
// architecture: O_DIRECT is 040000 on x86 (and asm-generic), 0200000 on arm and arm64 and 0400000
// on powerpc, where 0200000 is O_LARGEFILE.
#include <fcntl.h>

#include <string>

#include <gtest/gtest.h>

#include "analysis/analyzer.h"
#include "trace_builder.h"

namespace iotwin::analysis {
namespace {

constexpr uint32_t kDev = (8u << 20) | 1;
constexpr uint64_t kStart = 1'000'000'000ULL;  // FullCaptureMeta's anchor

// Direct ops of a trace from `arch` that opens a file with `flags` and reads it twice.
uint64_t DirectOps(const std::string& arch, uint32_t flags) {
  nlohmann::json meta = test::FullCaptureMeta();
  meta["host"]["arch"] = arch;
  test::TraceBuilder t(meta);
  t.Open(100, kStart + 1000, "/data/f", 3, kDev, 42, flags);
  t.Io(IOT_OP_READ, 100, kStart + 10'000, 1000, 3, kDev, 42, 0, 4096, 4096);
  t.Io(IOT_OP_READ, 100, kStart + 20'000, 1000, 3, kDev, 42, 4096, 4096, 4096);
  Analyzer a;
  a.SetMeta(meta);
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  return a.Model(std::nullopt)["totals"]["direct_ops"].get<uint64_t>();
}

TEST(AnalyzerDirectArch, X86ODirectIs040000) {
  EXPECT_EQ(DirectOps("x86_64", O_RDONLY | 040000), 2u);
  EXPECT_EQ(DirectOps("x86_64", O_RDONLY | 0200000), 0u);
}

TEST(AnalyzerDirectArch, ArmODirectIs0200000) {
  EXPECT_EQ(DirectOps("aarch64", O_RDONLY | 0200000), 2u);
  EXPECT_EQ(DirectOps("aarch64", O_RDONLY | 040000), 0u);  // O_DIRECTORY there
  EXPECT_EQ(DirectOps("armv7l", O_RDONLY | 0200000), 2u);
}

TEST(AnalyzerDirectArch, PowerpcODirectIs0400000NotLargefile) {
  EXPECT_EQ(DirectOps("ppc64le", O_RDONLY | 0400000), 2u);
  EXPECT_EQ(DirectOps("ppc64le", O_RDONLY | 0200000), 0u);  // O_LARGEFILE there
}

}  // namespace
}  // namespace iotwin::analysis
