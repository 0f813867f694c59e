// io_uring requests linked with IOSQE_IO_LINK / IOSQE_IO_HARDLINK (tests/progs/io_uring_linked.cc):
// a chain runs in order, and a failed link cancels its successors (ECANCELED) unless the link is
// hard. Recorded, then replayed in every pace: the replay submits the same chains, so every
// result matches, the cancelled write included (unlinked, it would write and the read after it
// would find its bytes).
#include <string>

#include "replay_util.h"

namespace iotwin::test {
namespace {

TEST(ReplayAsyncLinked, ChainsKeepTheirOrderAndCancellations) {
  TempDir dir;
  const std::string work = dir / "work", trace = dir / "orig.iotwin";
  ASSERT_EQ(mkdir(work.c_str(), 0755), 0);
  RunResult rec = test::Run({IotwinBin(), "record", "-o", trace, "--", TestProg("io_uring_linked"),
                             work},
                      120);
  ASSERT_EQ(rec.exit_code, 0) << rec.err << rec.out;
  // The program's own view: the second chain's write was cancelled, the hard-linked one ran.
  ASSERT_NE(rec.out.find("201 -125\n"), std::string::npos) << rec.out;
  ASSERT_NE(rec.out.find("401 4096\n"), std::string::npos) << rec.out;
  for (const std::string pace : {"fast", "gaps", "original"}) {
    SCOPED_TRACE("--pace " + pace);
    auto r = RunReplayCmd({trace, "--root", dir / ("root-" + pace), "--pace", pace, "--json", "-q"},
                          90);
    ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
    EXPECT_EQ(J(r.summary, "/per_op/uring:write/count"), 5u) << r.summary["per_op"].dump();
    EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(2);
  }
}

}  // namespace
}  // namespace iotwin::test
