// Imported block traces (ftrace, blkparse) correlated as completely as captured ones where the
// text allows: every completed request gets its D2C (completions print no "bytes left", and an
// ioprio in that slot stopped small requests from completing), and queued bios become bios of
// their requests (by position: text traces name no bio), including split pieces and the rest of
// the bio they were cut from.
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "correlate/correlate.h"
#include "correlate/layers_report.h"
#include "format/records.h"
#include "interop/importer.h"
#include "interop_test_util.h"

namespace iotwin {
namespace {

using correlate::Correlation;
using correlate::kNone;

Correlation CorrelateImport(interop::ImportFormat format, const std::string& text) {
  interop::testing::ImportOutcome out;
  interop::testing::ImportText(&out, format, text);
  EXPECT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.stats.unknown_lines, 0u);
  correlate::Correlator c;
  c.SetMeta({{"layers",
              {{"syscall", {{"enabled", false}, {"reason", "not in ftrace block events"}}},
               {"block", {{"enabled", true}}}}}},
            nlohmann::json::object());
  std::vector<uint8_t> buf;
  for (const auto& rec : out.sink.records()) {
    const auto* h = reinterpret_cast<const iot_rec_hdr*>(rec.data());
    buf.assign(std::max<size_t>(rec.size(), RecordFixedSize(h->type)), 0);
    std::memcpy(buf.data(), rec.data(), rec.size());
    c.Add(reinterpret_cast<const iot_rec_hdr*>(buf.data()));
  }
  return c.Finish();
}

std::string Ftrace(double t, const std::string& event, const std::string& payload) {
  return fmt::format("  fio-100 [000] ..... {:.6f}: {}: {}\n", t, event, payload);
}

// One request per size, each Q G I D C, with the ioprio modern kernels print.
TEST(BlockImportLayers, EveryCompletedFtraceRequestHasD2CAndItsBio) {
  std::string text;
  double t = 1000.0;
  uint64_t sector = 2048;
  const uint32_t sizes[] = {4096, 8192, 16384, 65536, 131072, 512};
  for (uint32_t size : sizes) {
    const uint32_t nr = size / 512;
    const std::string at = fmt::format("254,0 W {} + {} be,0,4 [fio]", sector, nr);
    text += Ftrace(t += 0.000005, "block_bio_queue", at);
    text += Ftrace(t += 0.000005, "block_getrq", at);
    text += Ftrace(t += 0.000005, "block_rq_insert",
                   fmt::format("254,0 W {} () {} + {} be,0,4 [fio]", size, sector, nr));
    text += Ftrace(t += 0.000005, "block_rq_issue",
                   fmt::format("254,0 W {} () {} + {} be,0,4 [fio]", size, sector, nr));
    text += Ftrace(t += 0.000050, "block_rq_complete",
                   fmt::format("254,0 W () {} + {} be,0,4 [0]", sector, nr));
    sector += nr;
  }
  Correlation c = CorrelateImport(interop::ImportFormat::kFtraceBlock, text);
  ASSERT_EQ(c.requests.size(), std::size(sizes));
  EXPECT_EQ(c.bios.size(), std::size(sizes));
  for (const auto& q : c.requests) {
    EXPECT_TRUE(q.completed) << q.sector;
    EXPECT_EQ(q.layers.d2c, 50'000) << q.sector;
    ASSERT_EQ(q.bios.size(), 1u) << q.sector;
    EXPECT_GT(q.layers.q2d, 0) << q.sector;
    EXPECT_GT(q.layers.q2c, 0) << q.sector;
    EXPECT_GE(q.layers.q2g, 0) << q.sector;
    EXPECT_NE(q.why.find("no system-call layer"), std::string::npos) << q.why;
  }
  nlohmann::json r = correlate::LayersReport(c);
  EXPECT_EQ(r["coverage"]["bios"], std::size(sizes));
  bool d2c_seen = false;
  for (const auto& m : r["btt"]) {
    if (m["metric"] == "D2C") {
      d2c_seen = true;
      EXPECT_EQ(m["n"], std::size(sizes)) << m.dump();
    }
  }
  EXPECT_TRUE(d2c_seen) << r["btt"].dump();
}

// A bio cut in two: the piece (X) and the rest each go into their own request, both with the
// queued bio's Q time; a bio merged into a request joins it too.
TEST(BlockImportLayers, SplitPiecesAndMergedBiosJoinTheirFtraceRequests) {
  std::string text;
  text += Ftrace(1000.000010, "block_bio_queue", "254,0 W 4096 + 512 [fio]");
  text += Ftrace(1000.000020, "block_split", "254,0 W 4096 / 4352 [fio]");
  text += Ftrace(1000.000030, "block_rq_issue", "254,0 W 131072 () 4096 + 256 [fio]");
  text += Ftrace(1000.000040, "block_rq_issue", "254,0 W 131072 () 4352 + 256 [fio]");
  text += Ftrace(1000.000100, "block_rq_complete", "254,0 W () 4096 + 256 [0]");
  text += Ftrace(1000.000110, "block_rq_complete", "254,0 W () 4352 + 256 [0]");
  // back merge: the second bio joins the request of the first
  text += Ftrace(1000.000200, "block_bio_queue", "254,0 R 100 + 8 [fio]");
  text += Ftrace(1000.000210, "block_rq_insert", "254,0 R 4096 () 100 + 8 [fio]");
  text += Ftrace(1000.000220, "block_bio_queue", "254,0 R 108 + 8 [fio]");
  text += Ftrace(1000.000230, "block_bio_backmerge", "254,0 R 108 + 8 [fio]");
  text += Ftrace(1000.000240, "block_rq_issue", "254,0 R 8192 () 100 + 16 [fio]");
  text += Ftrace(1000.000300, "block_rq_complete", "254,0 R () 100 + 16 [0]");
  Correlation c = CorrelateImport(interop::ImportFormat::kFtraceBlock, text);
  ASSERT_EQ(c.requests.size(), 3u);
  ASSERT_EQ(c.bios.size(), 4u);  // the queued bio, its piece, two read bios
  for (const auto& b : c.bios) EXPECT_NE(b.request, kNone) << b.sector;
  for (const auto& q : c.requests) {
    EXPECT_EQ(q.q_ts, q.sector == 100 ? 1000000200000u : 1000000010000u) << q.sector;
    EXPECT_GT(q.layers.d2c, 0) << q.sector;
    EXPECT_GT(q.layers.q2c, 0) << q.sector;
  }
  EXPECT_EQ(c.requests[2].bios.size(), 2u);
}

// blkparse: the same pairing of bios and the completion of small requests. (Its clock starts at
// 0, and a time of 0 reads as "not seen" in the correlation: the events here start later.)
TEST(BlockImportLayers, BlkparseBiosAndCompletions) {
  Correlation c = CorrelateImport(interop::ImportFormat::kBlkparse,
                                  "  8,0    3        1     0.000001000   697  Q   W 2048 + 8 [dd]\n"
                                  "  8,0    3        2     0.000002000   697  G   W 2048 + 8 [dd]\n"
                                  "  8,0    3        3     0.000003000   697  I   W 2048 + 8 [dd]\n"
                                  "  8,0    3        4     0.000004000   697  D   W 2048 + 8 [dd]\n"
                                  "  8,0    0        1     0.000504000     0  C   W 2048 + 8 [0]\n");
  ASSERT_EQ(c.requests.size(), 1u);
  ASSERT_EQ(c.bios.size(), 1u);
  EXPECT_EQ(c.requests[0].layers.d2c, 500'000);
  EXPECT_EQ(c.requests[0].layers.q2c, 503'000);
  EXPECT_EQ(c.requests[0].layers.q2g, 1'000);
}

// The text report of an import whose discard was never completed (no phase pair: no
// latency_ns) aborted with an uncaught nlohmann type_error.
TEST(BlockImportLayers, TextReportOfARequestWithoutLatencies) {
  Correlation c = CorrelateImport(
      interop::ImportFormat::kFtraceBlock,
      Ftrace(1000.004, "block_rq_issue", "254,0 DS 1048576 () 100000 + 2048 [fio]"));
  ASSERT_EQ(c.requests.size(), 1u);
  std::string text;
  EXPECT_NO_THROW(text = correlate::RenderLayersText(correlate::LayersReport(c)));
  EXPECT_NE(text.find("@100000"), std::string::npos) << text;
}

// Header layers of the wrong types (the header is the trace's) are read as absent, not thrown on.
TEST(BlockImportLayers, MalformedLayerHeadersAreIgnored) {
  for (const nlohmann::json& meta :
       {nlohmann::json{{"layers", "block"}},
        nlohmann::json{{"layers", {{"syscall", {{"enabled", "no"}, {"reason", 7}}},
                                   {"block", {{"enabled", 1}}}}}},
        nlohmann::json{{"layers", {{"syscall", {{"enabled", false}, {"reason", 7}}}}}}}) {
    correlate::Correlator c;
    c.SetMeta(meta, {{"lost", {{"block", "many"}}}});
    iot_block b{};
    InitRecord(&b, IOT_REC_BLOCK);
    b.phase = IOT_BLK_ISSUE;
    b.ts = 10;
    b.rq_id = 1;
    c.Add(&b.hdr);
    Correlation r;
    EXPECT_NO_THROW(r = c.Finish()) << meta.dump();
    EXPECT_EQ(r.lost_block, 0u);
  }
}

}  // namespace
}  // namespace iotwin
