// SyntheticTrace: builds traces record by record for analysis tests (and runtime tests of
// `iotwin report`/`compare`): keeps the records in memory, can feed them to an Analyzer
// directly or write them as a real trace file with TraceWriter.
#pragma once

#include <fcntl.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "format/records.h"
#include "format/trace_writer.h"
#include "iotwin_abi.h"

namespace iotwin::test {

inline nlohmann::json SyntheticMeta() {
  return {{"tool", "iotwin-test"},
          {"host",
           {{"hostname", "testhost"},
            {"kernel", "6.18.0-test"},
            {"arch", "x86_64"},
            {"cpus", 2},
            {"page_size", 4096},
            {"clock", "monotonic"},
            {"anchor", {{"monotonic_ns", 1'000'000'000ULL}, {"realtime_ns", 0}, {"boottime_ns", 0}}}}},
          {"command", {"synthetic", "--workload"}},
          {"layers",
           {{"syscall", {{"enabled", true}, {"reason", ""}}},
            {"memory", {{"enabled", true}, {"reason", ""}}},
            {"block", {{"enabled", true}, {"reason", ""}}},
            {"nvme", {{"enabled", false}, {"reason", "no NVMe device"}}},
            {"sched", {{"enabled", false}, {"reason", "not requested"}}}}}};
}

class SyntheticTrace {
 public:
  explicit SyntheticTrace(nlohmann::json meta = SyntheticMeta()) : meta_(std::move(meta)) {}

  nlohmann::json& meta() { return meta_; }
  const std::vector<std::vector<uint8_t>>& records() const { return records_; }

  // Interns `s`, emitting its STRING record the first time.
  uint32_t String(std::string_view s) {
    auto it = ids_.find(std::string(s));
    if (it != ids_.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(ids_.size() + 1);
    ids_[std::string(s)] = id;
    std::vector<uint8_t> rec(sizeof(iot_string) + s.size());
    iot_string h{};
    InitRecord(&h, IOT_REC_STRING);
    h.hdr.size = static_cast<uint16_t>(rec.size());
    h.id = id;
    h.len = static_cast<uint16_t>(s.size());
    std::memcpy(rec.data(), &h, sizeof h);
    std::memcpy(rec.data() + sizeof h, s.data(), s.size());
    records_.push_back(std::move(rec));
    return id;
  }

  template <typename T>
  void Add(const T& rec) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&rec);
    records_.emplace_back(p, p + rec.hdr.size);
  }

  // A system call with common defaults: tgid = tid unless set, 1 µs long, succeeded.
  static iot_syscall Sys(uint16_t op, uint32_t tid, uint64_t ts, uint32_t tgid = 0) {
    iot_syscall s{};
    InitRecord(&s, IOT_REC_SYSCALL);
    s.op = op;
    s.tid = tid;
    s.tgid = tgid ? tgid : tid;
    s.ts = ts;
    s.dur = 1000;
    s.fd = -1;
    s.fd2 = -1;
    return s;
  }

  void Open(uint32_t tid, uint64_t ts, std::string_view path, int fd, uint32_t dev, uint64_t ino,
            uint32_t flags = O_RDONLY, uint32_t tgid = 0) {
    iot_syscall s = Sys(IOT_OP_OPENAT, tid, ts, tgid);
    s.fd = -100;
    s.ret = fd;
    s.flags = flags;
    s.dev = dev;
    s.ino = ino;
    s.path_id = String(path);
    Add(s);
  }

  // pread64/pwrite64 (explicit offsets) or read/write (offset left 0: the analyzer tracks it).
  void Io(uint16_t op, uint32_t tid, uint64_t ts, uint64_t dur, int fd, uint32_t dev,
          uint64_t ino, uint64_t offset, uint64_t length, int64_t ret, uint32_t tgid = 0) {
    iot_syscall s = Sys(op, tid, ts, tgid);
    s.dur = dur;
    s.fd = fd;
    s.dev = dev;
    s.ino = ino;
    s.offset = offset;
    s.length = length;
    s.ret = ret;
    Add(s);
  }

  void Lseek(uint32_t tid, uint64_t ts, int fd, uint32_t dev, uint64_t ino, int64_t to,
             uint32_t whence = SEEK_SET, uint32_t tgid = 0) {
    iot_syscall s = Sys(IOT_OP_LSEEK, tid, ts, tgid);
    s.fd = fd;
    s.dev = dev;
    s.ino = ino;
    s.offset = static_cast<uint64_t>(to);
    s.aux = whence;
    s.ret = to;
    Add(s);
  }

  void Close(uint32_t tid, uint64_t ts, int fd, uint32_t dev, uint64_t ino, uint32_t tgid = 0) {
    iot_syscall s = Sys(IOT_OP_CLOSE, tid, ts, tgid);
    s.fd = fd;
    s.dev = dev;
    s.ino = ino;
    Add(s);
  }

  void Proc(uint16_t kind, uint64_t ts, uint32_t tgid, uint32_t tid, const char* comm,
            uint32_t child_tgid = 0, uint32_t child_tid = 0) {
    iot_proc p{};
    InitRecord(&p, IOT_REC_PROC);
    p.kind = kind;
    p.ts = ts;
    p.tgid = tgid;
    p.tid = tid;
    p.child_tgid = child_tgid;
    p.child_tid = child_tid;
    std::strncpy(p.comm, comm, sizeof p.comm - 1);
    Add(p);
  }

  void Block(uint16_t phase, uint64_t ts, uint32_t dev, uint64_t sector, uint32_t bytes,
             uint32_t flags, uint64_t rq_id) {
    iot_block b{};
    InitRecord(&b, IOT_REC_BLOCK);
    b.phase = phase;
    b.ts = ts;
    b.dev = dev;
    b.sector = sector;
    b.nr_sector = bytes / 512;
    b.bytes = bytes;
    b.flags = flags;
    b.rq_id = rq_id;
    Add(b);
  }

  void Fault(uint64_t ts, uint32_t tid, uint32_t dev, uint64_t ino, uint64_t pgoff, bool major,
             uint32_t nr_pages = 1, uint32_t tgid = 0) {
    iot_page_fault f{};
    InitRecord(&f, IOT_REC_PAGE_FAULT);
    f.ts = ts;
    f.tgid = tgid ? tgid : tid;
    f.tid = tid;
    f.dev = dev;
    f.ino = ino;
    f.pgoff = pgoff;
    f.flags = major ? IOT_PFF_MAJOR : 0;
    f.nr_pages = nr_pages;
    Add(f);
  }

  void PageCache(uint16_t kind, uint64_t ts, uint32_t dev, uint64_t ino, uint64_t index,
                 uint32_t nr_pages) {
    iot_page_cache c{};
    InitRecord(&c, IOT_REC_PAGE_CACHE);
    c.kind = kind;
    c.ts = ts;
    c.dev = dev;
    c.ino = ino;
    c.index = index;
    c.nr_pages = nr_pages;
    Add(c);
  }

  void Async(uint8_t engine, uint8_t phase, uint8_t opcode, uint64_t ts, uint32_t tid, int fd,
             uint64_t req_id, uint64_t offset, uint64_t length, int64_t res) {
    iot_async_io a{};
    InitRecord(&a, IOT_REC_ASYNC_IO);
    a.engine = engine;
    a.phase = phase;
    a.opcode = opcode;
    a.ts = ts;
    a.ctx = 0xc0ffee;
    a.req_id = req_id;
    a.user_data = req_id;
    a.offset = offset;
    a.length = length;
    a.res = res;
    a.tgid = tid;
    a.tid = tid;
    a.fd = fd;
    Add(a);
  }

  void Intent(uint16_t kind, uint64_t ts, uint32_t tid, std::string_view label,
              uint32_t tgid = 0) {
    iot_intent i{};
    InitRecord(&i, IOT_REC_INTENT);
    i.kind = kind;
    i.source = IOT_INTENT_SRC_MARKER;
    i.ts = ts;
    i.tgid = tgid ? tgid : tid;
    i.tid = tid;
    i.label_id = String(label);
    Add(i);
  }

  void Lost(uint16_t source, uint16_t cpu, uint64_t ts, uint64_t count) {
    iot_lost l{};
    InitRecord(&l, IOT_REC_LOST);
    l.source = source;
    l.cpu = cpu;
    l.ts = ts;
    l.count = count;
    Add(l);
  }

  // Feeds every record to `sink(const iot_rec_hdr*)`, zero-extended like TraceReader does.
  template <typename Sink>
  void Feed(Sink&& sink) const {
    std::vector<uint8_t> buf;
    for (const auto& r : records_) {
      const auto* h = reinterpret_cast<const iot_rec_hdr*>(r.data());
      size_t need = std::max<size_t>(r.size(), RecordFixedSize(h->type));
      buf.assign(need, 0);
      std::memcpy(buf.data(), r.data(), r.size());
      sink(reinterpret_cast<const iot_rec_hdr*>(buf.data()));
    }
  }

  Status Write(const std::string& path, const nlohmann::json& summary) const {
    auto w = TraceWriter::Create(path, meta_);
    if (!w.ok()) return w.status();
    for (const auto& r : records_) {
      const auto* h = reinterpret_cast<const iot_rec_hdr*>(r.data());
      if (h->type == IOT_REC_STRING) {
        // The writer owns the string table: re-intern so its ids match ours (same order).
        const auto* s = reinterpret_cast<const iot_string*>(h);
        std::string_view text(reinterpret_cast<const char*>(r.data()) + sizeof(iot_string), s->len);
        auto id = (*w)->InternString(text);
        if (!id.ok()) return id.status();
        if (*id != s->id) return Status::Internal("string id mismatch {} != {}", *id, s->id);
        continue;
      }
      IOTWIN_RETURN_IF_ERROR((*w)->Append(h));
    }
    return (*w)->Finish(summary);
  }

 private:
  nlohmann::json meta_;
  std::vector<std::vector<uint8_t>> records_;
  std::unordered_map<std::string, uint32_t> ids_;
};

}  // namespace iotwin::test
