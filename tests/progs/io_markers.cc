// io_markers LOG DIR: emits intent markers through $IOTWIN_MARKER (the protocol of
// workloads/marker.h: one write of "B label\n", "E label\n", "I label[ value]\n"), with file
// I/O in between, plus one malformed marker; logs each marker ({"kind": "marker"}) and the
// pwrite calls between brackets (prog_log.h).
#include <cstring>
#include <string>

#include "prog_log.h"

using iotwin::progs::Entry;
using iotwin::progs::Sys;

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: io_markers LOG DIR\n");
    return 2;
  }
  iotwin::progs::Log log(argv[1]);
  const char* marker_path = getenv("IOTWIN_MARKER");
  if (!marker_path || !*marker_path) {
    fprintf(stderr, "IOTWIN_MARKER is not set\n");
    return 4;
  }
  int mfd = open(marker_path, O_WRONLY | O_CLOEXEC);
  if (mfd < 0) iotwin::progs::Die(marker_path);
  std::string path = std::string(argv[2]) + "/marked.dat";
  int fd = open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  if (fd < 0) iotwin::progs::Die("open");
  static char buf[4096];
  auto mark = [&](const std::string& line, const char* kind, const char* label, long value) {
    ssize_t w = write(mfd, line.data(), line.size());
    Entry e = Entry::Kind("marker").Str("kind_char", kind).Str("label", label).Int("value", value);
    log.Add(e.Int("written", w));
  };
  iotwin::progs::BeginMark();
  mark("B load\n", "B", "load", 0);
  for (int i = 0; i < 3; i++) {
    long r = Sys(SYS_pwrite64, fd, buf, 4096, 4096 * i);
    log.Add(
        Entry("pwrite64").Int("fd", fd).U64("length", 4096).U64("offset", 4096 * i).Int("ret", r));
    mark("I step " + std::to_string(42 + i) + "\n", "I", "step", 42 + i);
  }
  mark("E load\n", "E", "load", 0);
  mark("I done\n", "I", "done", 0);
  mark("X not-a-marker\n", "X", "", 0);  // malformed: counted, not recorded
  iotwin::progs::EndMark();
  log.Flush();
  return 0;
}
