#include "capture/ring_consumer.h"

#include <bpf/libbpf.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string_view>
#include <vector>

#include "capture_wire.h"
#include "syscall_wire.h"
#include "format/records.h"

namespace iotwin::capture {

Result<std::unique_ptr<RingConsumer>> RingConsumer::Create(int ring_fd, TraceWriter* writer) {
  std::unique_ptr<RingConsumer> c(new RingConsumer(writer));
  c->ring_ = ring_buffer__new(ring_fd, &RingConsumer::OnRecord, c.get(), nullptr);
  if (!c->ring_) return Status::FromErrno(errno, "opening the BPF ring buffer");
  return c;
}

RingConsumer::~RingConsumer() {
  if (ring_) ring_buffer__free(ring_);
}

int RingConsumer::OnRecord(void* ctx, void* data, size_t size) {
  auto* self = static_cast<RingConsumer*>(ctx);
  Status st = self->Handle(static_cast<const uint8_t*>(data), size);
  if (!st.ok()) {
    if (self->error_.ok()) self->error_ = st;
    return -1;  // stops this round of consumption; the error is reported by Poll/Drain
  }
  return 0;
}

Status RingConsumer::Poll(int timeout_ms) {
  if (!ring_) return Status::Internal("ring consumer without a ring");
  int n = ring_buffer__poll(ring_, timeout_ms);
  if (n < 0 && n != -EINTR && error_.ok()) {
    return Status::FromErrno(-n, "polling the BPF ring buffer");
  }
  if (!error_.ok()) return error_;
  // Records submitted without a wake-up are found here.
  n = ring_buffer__consume(ring_);
  if (!error_.ok()) return error_;
  if (n < 0) return Status::FromErrno(-n, "consuming the BPF ring buffer");
  return Status::Ok();
}

Status RingConsumer::Drain() {
  if (!ring_) return Status::Internal("ring consumer without a ring");
  for (;;) {
    int n = ring_buffer__consume(ring_);
    if (!error_.ok()) return error_;
    if (n < 0) return Status::FromErrno(-n, "draining the BPF ring buffer");
    if (n == 0) return Status::Ok();
  }
}

Status RingConsumer::Append(const iot_rec_hdr* rec) {
  IOTWIN_RETURN_IF_ERROR(writer_->Append(rec));
  if (rec->type <= IOT_REC_MAX) counts_.records[rec->type]++;
  if (rec->type == IOT_REC_SYSCALL && syscall_observer_) {
    syscall_observer_(*reinterpret_cast<const iot_syscall*>(rec));
  }
  return Status::Ok();
}

Status RingConsumer::Handle(const uint8_t* data, size_t size) {
  counts_.ring_records++;
  counts_.ring_bytes += size;
  iot_rec_hdr hdr;
  if (size < sizeof(hdr)) {
    counts_.malformed++;
    return Status::Ok();
  }
  memcpy(&hdr, data, sizeof(hdr));
  if (hdr.size > size) {
    counts_.malformed++;
    return Status::Ok();
  }
  switch (hdr.type) {
    case IOT_REC_SYSCALL:
    case IOT_REC_PROC:
    case IOT_REC_ASYNC_IO:
    case IOT_REC_PAGE_FAULT:
    case IOT_REC_PAGE_CACHE:
    case IOT_REC_WRITEBACK:
    case IOT_REC_BLOCK:
    case IOT_REC_NVME:
    case IOT_REC_SCHED:
      if (hdr.size < RecordFixedSize(hdr.type)) {
        counts_.malformed++;
        return Status::Ok();
      }
      return Append(reinterpret_cast<const iot_rec_hdr*>(data));
    case IOT_REC_FDLIST: {
      // The descriptor list follows its call's record; its entries must all be there.
      iot_fdlist l;
      if (hdr.size < sizeof(l)) {
        counts_.malformed++;
        return Status::Ok();
      }
      memcpy(&l, data, sizeof(l));
      if (l.captured > IOT_FDLIST_MAX ||
          hdr.size < sizeof(l) + size_t{l.captured} * sizeof(iot_fdlist_entry)) {
        counts_.malformed++;
        return Status::Ok();
      }
      return Append(reinterpret_cast<const iot_rec_hdr*>(data));
    }
    case IOT_WIRE_SYSCALL_SHORT:
      return HandleSyscallShort(data, hdr.size);
    case IOT_WIRE_SYSCALL_EXT:
      return HandleSyscallExt(data, hdr.size);
    case IOT_WIRE_EXEC:
      return HandleExec(data, hdr.size);
    case IOT_WIRE_INTENT:
      return HandleIntent(data, hdr.size);
    case IOT_WIRE_ASYNC_EXT:
      return HandleAsyncExt(data, hdr.size);
    default: {
      auto h = wire_handlers_.find(hdr.type);
      if (h != wire_handlers_.end()) return h->second(data, hdr.size);
      counts_.malformed++;
      return Status::Ok();
    }
  }
}

Status RingConsumer::HandleSyscallShort(const uint8_t* data, size_t size) {
  iot_wire_syscall_short w;
  if (size < sizeof(w)) {
    counts_.malformed++;
    return Status::Ok();
  }
  memcpy(&w, data, sizeof(w));
  iot_syscall sc;
  memset(&sc, 0, sizeof(sc));
  InitRecord(&sc, IOT_REC_SYSCALL);
  sc.op = w.op;
  sc.cpu = w.cpu;
  sc.ts = w.ts;
  sc.dur = w.dur;
  sc.tgid = w.tgid;
  sc.tid = w.tid;
  sc.ret = w.ret;
  sc.fd = w.fd;
  sc.fd2 = IOT_WIRE_SHORT_FD2;
  sc.offset = w.offset;
  sc.length = w.length;
  sc.ino = w.ino;
  sc.fsize = w.fsize;
  sc.dev = w.dev;
  sc.ftype = w.ftype;
  sc.sflags = w.sflags;
  return Append(&sc.hdr);
}

// The IOVEC record after a vectored call or request: `captured` (<= IOT_IOVEC_MAX) lengths.
Status RingConsumer::AppendIovec(uint32_t tid, uint64_t ts, uint16_t count, const uint8_t* lens,
                                 size_t captured) {
  alignas(8) uint8_t buf[sizeof(iot_iovec) + IOT_IOVEC_MAX * 8];
  iot_iovec iov{};
  InitRecord(&iov, IOT_REC_IOVEC);
  iov.hdr.size = static_cast<uint16_t>(sizeof(iov) + captured * 8);
  iov.tid = tid;
  iov.count = count;
  iov.captured = static_cast<uint16_t>(captured);
  iov.ts = ts;
  memcpy(buf, &iov, sizeof(iov));
  memcpy(buf + sizeof(iov), lens, captured * 8);
  return Append(reinterpret_cast<const iot_rec_hdr*>(buf));
}

// A vectored async request: its ASYNC_IO record, then its IOVEC record (same tid and ts).
Status RingConsumer::HandleAsyncExt(const uint8_t* data, size_t size) {
  iot_wire_async_ext ext;
  if (size < sizeof(ext)) {
    counts_.malformed++;
    return Status::Ok();
  }
  memcpy(&ext, data, sizeof(ext));
  const size_t captured = ext.iov_captured;
  if (captured > IOT_IOVEC_MAX || captured * 8 > size - sizeof(ext)) {
    counts_.malformed++;
    return Status::Ok();
  }
  iot_async_io a = ext.a;
  InitRecord(&a, IOT_REC_ASYNC_IO);
  IOTWIN_RETURN_IF_ERROR(Append(&a.hdr));
  return AppendIovec(a.tid, a.ts, a.iov_count, data + sizeof(ext), captured);
}

Status RingConsumer::HandleSyscallExt(const uint8_t* data, size_t size) {
  iot_wire_syscall_ext ext;
  if (size < sizeof(ext)) {
    counts_.malformed++;
    return Status::Ok();
  }
  memcpy(&ext, data, sizeof(ext));
  const uint8_t* tail = data + IOT_WIRE_SYSCALL_EXT_TAIL;
  size_t tail_size = size - IOT_WIRE_SYSCALL_EXT_TAIL;
  iot_syscall sc = ext.sc;
  InitRecord(&sc, IOT_REC_SYSCALL);

  if (ext.path_len[0] == IOT_WIRE_NO_PATH) {
    // vectored call: the syscall record, then its iovec layout
    size_t captured = ext.iov_captured;
    if (captured > IOT_IOVEC_MAX || captured * 8 > tail_size) {
      counts_.malformed++;
      return Status::Ok();
    }
    IOTWIN_RETURN_IF_ERROR(Append(&sc.hdr));
    return AppendIovec(sc.tid, sc.ts, ext.iov_count, tail, captured);
  }

  size_t offset = 0;
  uint32_t* ids[2] = {&sc.path_id, &sc.path2_id};
  for (int i = 0; i < 2; i++) {
    uint16_t len = ext.path_len[i];
    if (len == IOT_WIRE_NO_PATH) continue;
    if (offset + len > tail_size) {
      counts_.malformed++;
      return Status::Ok();
    }
    if (len == 0 && (sc.sflags & IOT_SCF_PATH_FAULT)) {
      offset += len;
      continue;  // unreadable: no id
    }
    bool truncated = (sc.sflags & IOT_SCF_PATH_TRUNC) && len >= IOT_STRING_MAX;
    auto id = writer_->InternString(
        std::string_view(reinterpret_cast<const char*>(tail + offset), len), truncated);
    if (!id.ok()) return id.status();
    *ids[i] = id.value();
    offset += len;
  }
  return Append(&sc.hdr);
}

Status RingConsumer::HandleExec(const uint8_t* data, size_t size) {
  iot_wire_exec ex;
  if (size < sizeof(ex)) {
    counts_.malformed++;
    return Status::Ok();
  }
  memcpy(&ex, data, sizeof(ex));
  if (sizeof(ex) + ex.filename_len > size) {
    counts_.malformed++;
    return Status::Ok();
  }
  iot_proc proc = ex.proc;
  InitRecord(&proc, IOT_REC_PROC);
  if (ex.filename_len > 0) {
    auto id = writer_->InternString(
        std::string_view(reinterpret_cast<const char*>(data + sizeof(ex)), ex.filename_len),
        (ex.filename_flags & IOT_STRF_TRUNCATED) != 0);
    if (!id.ok()) return id.status();
    proc.path_id = id.value();
  }
  return Append(&proc.hdr);
}

Status RingConsumer::HandleIntent(const uint8_t* data, size_t size) {
  iot_wire_intent w;
  if (size < sizeof(w) || sizeof(w) + reinterpret_cast<const iot_wire_intent*>(data)->len > size) {
    counts_.malformed++;
    return Status::Ok();
  }
  memcpy(&w, data, sizeof(w));
  iot_intent in;
  memset(&in, 0, sizeof(in));
  InitRecord(&in, IOT_REC_INTENT);
  in.source = w.source;
  in.ts = w.ts;
  in.tgid = w.tgid;
  in.tid = w.tid;
  if (w.source == IOT_INTENT_SRC_UPROBE) {
    in.label_id = static_cast<uint32_t>(w.cookie);
    in.kind = static_cast<uint16_t>(w.cookie >> 32);
    return Append(&in.hdr);
  }
  // The marker protocol (workloads/marker.h): one write of "B label\n", "E label\n",
  // "I label\n" or "I label value\n".
  std::string_view line(reinterpret_cast<const char*>(data + sizeof(w)), w.len);
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  bool ok = line.size() >= 3 && line[1] == ' ';
  if (ok) {
    switch (line[0]) {
      case 'B':
        in.kind = IOT_INTENT_BEGIN;
        break;
      case 'E':
        in.kind = IOT_INTENT_END;
        break;
      case 'I':
        in.kind = IOT_INTENT_INSTANT;
        break;
      default:
        ok = false;
    }
  }
  std::string_view label;
  if (ok) {
    std::string_view rest = line.substr(2);
    size_t sp = rest.find(' ');
    label = rest.substr(0, sp);
    if (sp != std::string_view::npos) {
      std::string_view value = rest.substr(sp + 1);
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), in.value);
      ok = in.kind == IOT_INTENT_INSTANT && ec == std::errc() && end == value.data() + value.size();
    }
    ok = ok && !label.empty();
  }
  if (!ok) {
    counts_.bad_markers++;
    return Status::Ok();
  }
  auto id = writer_->InternString(label);
  if (!id.ok()) return id.status();
  in.label_id = id.value();
  return Append(&in.hdr);
}

}  // namespace iotwin::capture
