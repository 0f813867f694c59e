#include "oplog.h"

#include <fmt/format.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <tuple>

namespace iotwin::workload {

namespace {

void AppendJsonString(std::string& out, std::string_view s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out.append(std::string_view("\\\""));
        break;
      case '\\':
        out.append(std::string_view("\\\\"));
        break;
      case '\n':
        out.append(std::string_view("\\n"));
        break;
      case '\t':
        out.append(std::string_view("\\t"));
        break;
      default:
        if (c < 0x20) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

void AppendRecord(std::string& out, const ThreadLog& log, size_t seq, const OpRecord& r) {
  const OpDesc& d = *r.desc;
  auto it = std::back_inserter(out);
  fmt::format_to(it,
                 "{{\"seq\":{},\"thread\":{},\"tid\":{},\"op\":\"{}\",\"ts_ns\":{},\"dur_ns\":{}",
                 seq, log.thread(), log.tid(), d.name, r.ts_ns, r.dur_ns);
  if (d.fd) fmt::format_to(it, ",\"fd\":{}", r.fd);
  if (d.offset) fmt::format_to(it, ",\"offset\":{}", r.offset);
  if (d.len) fmt::format_to(it, ",\"len\":{}", r.len);
  fmt::format_to(it, ",\"ret\":{}", r.ret);
  if (d.addr_name != nullptr) fmt::format_to(it, ",\"{}\":{}", d.addr_name, r.addr);
  for (int i = 0; i < 3; i++) {
    if (d.arg_names[i] != nullptr) fmt::format_to(it, ",\"{}\":{}", d.arg_names[i], r.args[i]);
  }
  if (d.str_name != nullptr && r.str >= 0) {
    fmt::format_to(it, ",\"{}\":", d.str_name);
    AppendJsonString(out, log.str(r.str));
  }
  if (d.constant != nullptr) out.append(std::string_view(d.constant));
  out.append(std::string_view("}\n"));
}

}  // namespace

ThreadLog::ThreadLog(bool enabled, int thread, size_t reserve)
    : enabled_(enabled), thread_(thread) {
  if (enabled_) {
    records_.reserve(reserve);
    strings_.reserve(64);
  }
}

void ThreadLog::BindCurrentThread() { tid_ = static_cast<pid_t>(::syscall(SYS_gettid)); }

int32_t ThreadLog::Intern(std::string_view s) {
  if (!enabled_) return -1;
  // Repeats are almost always the most recent string (the file being worked on).
  if (!strings_.empty() && strings_.back() == s) return static_cast<int32_t>(strings_.size() - 1);
  strings_.emplace_back(s);
  return static_cast<int32_t>(strings_.size() - 1);
}

ThreadLog* OpLog::NewThread(size_t reserve) {
  threads_.push_back(
      std::make_unique<ThreadLog>(enabled_, static_cast<int>(threads_.size()), reserve));
  return threads_.back().get();
}

size_t OpLog::size() const {
  size_t n = 0;
  for (const auto& t : threads_) n += t->records().size();
  return n;
}

Status OpLog::WriteJsonl(const std::string& path) const {
  // (ts, thread, index): per-thread order is kept for equal timestamps (async requests share
  // their submitting syscall's timestamp and follow it).
  std::vector<std::tuple<uint64_t, size_t, size_t>> order;
  order.reserve(size());
  for (size_t t = 0; t < threads_.size(); t++) {
    const auto& recs = threads_[t]->records();
    for (size_t i = 0; i < recs.size(); i++) order.emplace_back(recs[i].ts_ns, t, i);
  }
  std::sort(order.begin(), order.end());

  size_t next = 0;
  return WriteTextFile(path, "op log", [&](std::string& out) {
    if (next == order.size()) return false;
    const auto& [ts, t, i] = order[next++];
    const ThreadLog& log = *threads_[t];
    AppendRecord(out, log, i, log.records()[i]);
    return true;
  });
}

Status WriteTextFile(const std::string& path, std::string_view what,
                     const std::function<bool(std::string&)>& next) {
  FILE* f = std::fopen(path.c_str(), "we");
  if (f == nullptr) return Status::FromErrno(errno, fmt::format("{} {}", what, path));
  std::string out;
  bool ok = true;
  for (bool more = true; more;) {
    more = next(out);
    if (out.size() > (1 << 20) || !more) {
      ok = ok && std::fwrite(out.data(), 1, out.size(), f) == out.size();
      out.clear();
    }
  }
  const int saved = errno;
  if (std::fclose(f) != 0 || !ok) {
    return Status::FromErrno(ok ? errno : saved, fmt::format("writing {} {}", what, path));
  }
  return Status::Ok();
}

}  // namespace iotwin::workload
