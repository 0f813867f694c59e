#include "capture/libbpf_log.h"

#include <bpf/libbpf.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

#include "base/mutex.h"

namespace iotwin::capture {
namespace {

// libbpf's messages: the last lines are kept to explain a failure; IOTWIN_BPF_DEBUG=1 prints
// them as they come.
Mutex g_log_mu;
std::deque<std::string> g_log GUARDED_BY(g_log_mu);

int LibbpfPrint(enum libbpf_print_level level, const char* format, va_list args) {
  static const bool debug = [] {
    const char* e = getenv("IOTWIN_BPF_DEBUG");
    return e && *e == '1';
  }();
  if (debug) {
    // Whole, not through the line buffer: a verifier log comes as one message of many KiB.
    va_list copy;
    va_copy(copy, args);
    vfprintf(stderr, format, copy);
    va_end(copy);
  }
  char line[1024];
  vsnprintf(line, sizeof line, format, args);
  if (level == LIBBPF_DEBUG) return 0;
  MutexLock lock(&g_log_mu);
  g_log.emplace_back(line);
  while (g_log.size() > 40) g_log.pop_front();
  return 0;
}

}  // namespace

void InstallLibbpfLogger() {
  static std::once_flag once;
  std::call_once(once, [] { libbpf_set_print(LibbpfPrint); });
}

std::string LibbpfLogTail() {
  MutexLock lock(&g_log_mu);
  std::string out;
  for (const auto& l : g_log) out += "  " + l;
  g_log.clear();
  return out;
}

Status LibbpfError(int err, std::string_view what) {
  if (err < 0) err = -err;
  std::string tail = LibbpfLogTail();
  std::string msg = fmt::format("{}: {}", what, strerror(err));
  if (!tail.empty()) msg += "\nlibbpf said:\n" + tail;
  if (err == EPERM || err == EACCES) return Status::Permission("{}", msg);
  return Status::Error(Status::Code::kUnsupported, msg);
}

}  // namespace iotwin::capture
