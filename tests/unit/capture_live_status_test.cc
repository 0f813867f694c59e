// record's live status line (src/capture/live_status.*): on a terminal it keeps the bottom row
// through a scroll region and gives it back; elsewhere it is a carriage-return line.
#include "capture/live_status.h"

#include <fcntl.h>
#include <pty.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

namespace iotwin::capture {
namespace {

TEST(LiveStatus, OnATerminalTheBottomRowIsReservedAndGivenBack) {
  const std::string first = LiveStatus::DrawSequence("3 events", 24, 80, 0);
  EXPECT_EQ(first.find('\n'), 0u) << "a new line makes room before the region shrinks";
  EXPECT_NE(first.find("\033[1;23r"), std::string::npos) << "rows 1-23 scroll";
  EXPECT_NE(first.find("\033[24;1H\033[2K3 events"), std::string::npos) << "drawn on row 24";

  const std::string again = LiveStatus::DrawSequence("4 events", 24, 80, 24);
  EXPECT_EQ(again.find("\033[1;23r"), std::string::npos) << "the region is set once";
  EXPECT_NE(again.find("\033[24;1H\033[2K4 events"), std::string::npos);

  const std::string resized = LiveStatus::DrawSequence("5 events", 30, 80, 24);
  EXPECT_NE(resized.find("\033[24;1H\033[2K"), std::string::npos) << "the old row is cleared";
  EXPECT_NE(resized.find("\033[1;29r"), std::string::npos);
  EXPECT_NE(resized.find("\033[30;1H\033[2K5 events"), std::string::npos);

  const std::string clear = LiveStatus::ClearSequence(24);
  EXPECT_NE(clear.find("\033[r"), std::string::npos) << "the whole screen scrolls again";
  EXPECT_NE(clear.find("\033[24;1H\033[2K"), std::string::npos);
}

TEST(LiveStatus, TextIsCutToTheWidthAndSmallOrUnknownTerminalsGetACarriageReturnLine) {
  const std::string cut = LiveStatus::DrawSequence("0123456789", 24, 6, 24);
  EXPECT_NE(cut.find("\033[2K01234\0338"), std::string::npos) << "width 6 keeps 5 characters";
  EXPECT_EQ(LiveStatus::DrawSequence("x", 0, 0, 0), "\r\033[Kx");
  EXPECT_EQ(LiveStatus::DrawSequence("x", 2, 80, 0), "\r\033[Kx");
  EXPECT_EQ(LiveStatus::ClearSequence(0), "\r\033[K");
  // A terminal shrunk below three rows gets its scroll region back before the plain line.
  const std::string shrunk = LiveStatus::DrawSequence("x", 2, 80, 24);
  EXPECT_NE(shrunk.find("\033[r"), std::string::npos);
  EXPECT_EQ(shrunk.substr(shrunk.size() - 5), "\r\033[Kx");
}

std::string ReadAvailable(int fd) {
  std::string out;
  char buf[512];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

TEST(LiveStatus, DrawsOnARealTerminalOfItsSizeAndClearsOnDestruction) {
  int master = -1, slave = -1;
  winsize ws{};
  ws.ws_row = 10;
  ws.ws_col = 40;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, &ws), 0);
  fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
  {
    LiveStatus line(slave);
    line.Draw("12 events");
    const std::string drawn = ReadAvailable(master);
    EXPECT_NE(drawn.find("\033[1;9r"), std::string::npos) << drawn.size();
    EXPECT_NE(drawn.find("\033[10;1H\033[2K12 events"), std::string::npos);
  }
  const std::string cleared = ReadAvailable(master);
  EXPECT_NE(cleared.find("\033[r"), std::string::npos) << "the destructor restores the region";
  EXPECT_NE(cleared.find("\033[10;1H\033[2K"), std::string::npos);

  LiveStatus never_drawn(slave);
  never_drawn.Clear();
  EXPECT_EQ(ReadAvailable(master), "") << "nothing drawn, nothing cleared";
  close(slave);
  close(master);
}

}  // namespace
}  // namespace iotwin::capture
