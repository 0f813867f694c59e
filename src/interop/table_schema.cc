#include "interop/table_schema.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "interop/block_text.h"
#include "interop/table_columns.h"

namespace iotwin::interop::table_export {

std::string_view StemOf(uint16_t type) {
  for (const RecordTable& t : kRecordTables) {
    if (t.type == type) return t.stem;
  }
  return "unknown";
}

namespace {

std::string_view Cstr(const char* s, size_t n) {
  size_t len = 0;
  while (len < n && s[len]) len++;
  return {s, len};
}

std::string_view ProcKind(uint16_t k) {
  static const char* kNames[] = {"?", "fork", "thread", "exec", "exit", "attach", "cwd", "start"};
  return k < 8 ? kNames[k] : "?";
}
std::string_view PageCacheKind(uint16_t k) {
  static const char* kNames[] = {"?", "add", "delete", "readahead"};
  return k < 4 ? kNames[k] : "?";
}
std::string_view WritebackKind(uint16_t k) {
  static const char* kNames[] = {"?",           "dirty_folio", "dirty_inode", "inode_start",
                                 "inode_done",  "work_start",  "work_done",   "wait"};
  return k < 8 ? kNames[k] : "?";
}
std::string_view NvmePhase(uint16_t k) {
  static const char* kNames[] = {"?", "setup", "complete", "sq"};
  return k < 4 ? kNames[k] : "?";
}
std::string_view SchedKind(uint16_t k) {
  static const char* kNames[] = {"?", "offcpu", "hardirq", "softirq"};
  return k < 4 ? kNames[k] : "?";
}
std::string_view IntentKind(uint16_t k) {
  static const char* kNames[] = {"instant", "begin", "end"};
  return k < 3 ? kNames[k] : "?";
}

}  // namespace

template <typename TableT>
void RowFormatter::Row(TableT& t, const iot_rec_hdr* h, const RowContext& ctx) const {
  switch (h->type) {
    case IOT_REC_SYSCALL: return Put(t, As<iot_syscall>(h), ctx);
    case IOT_REC_PROC: return Put(t, As<iot_proc>(h), ctx);
    case IOT_REC_FD_SNAPSHOT: return Put(t, As<iot_fd_snapshot>(h), ctx);
    case IOT_REC_MAP_SNAPSHOT: return Put(t, As<iot_map_snapshot>(h), ctx);
    case IOT_REC_PAGE_FAULT: return Put(t, As<iot_page_fault>(h), ctx);
    case IOT_REC_PAGE_CACHE: return Put(t, As<iot_page_cache>(h), ctx);
    case IOT_REC_WRITEBACK: return Put(t, As<iot_writeback>(h), ctx);
    case IOT_REC_BLOCK: return Put(t, As<iot_block>(h), ctx);
    case IOT_REC_NVME: return Put(t, As<iot_nvme>(h), ctx);
    case IOT_REC_ASYNC_IO: return Put(t, As<iot_async_io>(h), ctx);
    case IOT_REC_INTENT: return Put(t, As<iot_intent>(h), ctx);
    case IOT_REC_LOST: return Put(t, As<iot_lost>(h), ctx);
    case IOT_REC_CLOCK: return Put(t, As<iot_clock>(h), ctx);
    case IOT_REC_CACHE_STATE: return Put(t, As<iot_cache_state>(h), ctx);
    case IOT_REC_SUBPAGE: return Put(t, As<iot_subpage>(h), ctx);
    case IOT_REC_SCHED: return Put(t, As<iot_sched>(h), ctx);
    case IOT_REC_IOVEC: return Iovec(t, As<iot_iovec>(h), h);
    default: return;
  }
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_syscall& s, const RowContext& ctx) const {
  const SyscallFlagSets& sets = sets_[s.op <= IOT_OP_MAX ? s.op : 0];
  auto w = t.Begin();
  w.U("ts_ns", s.ts);
  w.U("dur_ns", s.dur);
  w.U("tgid", s.tgid);
  w.U("tid", s.tid);
  w.U("cpu", s.cpu);
  w.Word("op", OpName(s.op));
  w.I("ret", s.ret);
  w.I("fd", s.fd);
  w.I("fd2", s.fd2);
  w.U("offset", s.offset);
  w.U("length", s.length);
  w.U("aux", s.aux);
  w.Names("aux_names", names_, sets.aux, s.aux);
  w.U("flags", s.flags);
  w.Names("flags_names", names_, sets.flags, s.flags);
  w.U("mode", s.mode);
  w.Names("mode_names", names_, sets.mode, s.mode);
  w.U("ino", s.ino);
  w.U("fsize", s.fsize);
  w.U("dev", s.dev);
  w.File("file_id", ctx.file);
  w.S("path", ctx.text[0], &t.scratch());
  w.File("file2_id", ctx.file2);
  w.S("path2", ctx.text[1], &t.scratch());
  w.U("ftype", s.ftype);
  w.U("sflags", s.sflags);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_proc& p, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", p.ts);
  w.Word("kind", ProcKind(p.kind));
  w.U("flags", p.flags);
  w.U("tgid", p.tgid);
  w.U("tid", p.tid);
  w.U("child_tgid", p.child_tgid);
  w.U("child_tid", p.child_tid);
  w.U("clone_flags", p.clone_flags);
  w.I("exit_code", p.exit_code);
  w.S("path", ctx.text[0], &t.scratch());
  w.S("comm", Cstr(p.comm, sizeof p.comm), &t.scratch());
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_fd_snapshot& s, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", s.ts);
  w.U("tgid", s.tgid);
  w.I("fd", s.fd);
  w.S("path", ctx.text[0], &t.scratch());
  w.U("ino", s.ino);
  w.U("dev", s.dev);
  w.File("file_id", ctx.file);
  w.U("pos", s.pos);
  w.U("fsize", s.fsize);
  w.U("flags", s.flags);
  w.Names("flags_names", names_, FlagSet::kOpen, s.flags);
  w.U("ftype", s.ftype);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_map_snapshot& m, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", m.ts);
  w.U("tgid", m.tgid);
  w.U("start", m.start);
  w.U("end", m.end);
  w.U("pgoff", m.pgoff);
  w.U("ino", m.ino);
  w.U("dev", m.dev);
  w.File("file_id", ctx.file);
  w.S("path", ctx.text[0], &t.scratch());
  w.U("prot", m.prot);
  w.Names("prot_names", names_, FlagSet::kProt, m.prot);
  w.U("flags", m.flags);
  w.Names("flags_names", names_, FlagSet::kMap, m.flags);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_page_fault& f, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", f.ts);
  w.U("tgid", f.tgid);
  w.U("tid", f.tid);
  w.U("cpu", f.cpu);
  w.U("addr", f.addr);
  w.U("ino", f.ino);
  w.U("dev", f.dev);
  w.File("file_id", ctx.file);
  w.U("pgoff", f.pgoff);
  w.U("nr_pages", f.nr_pages);
  w.U("write", (f.flags & IOT_PFF_WRITE) ? 1 : 0);
  w.U("major", (f.flags & IOT_PFF_MAJOR) ? 1 : 0);
  w.U("shared", (f.flags & IOT_PFF_SHARED) ? 1 : 0);
  w.U("exec", (f.flags & IOT_PFF_EXEC) ? 1 : 0);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_page_cache& c, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", c.ts);
  w.Word("kind", PageCacheKind(c.kind));
  w.U("cpu", c.cpu);
  w.U("ino", c.ino);
  w.U("dev", c.dev);
  w.File("file_id", ctx.file);
  w.U("index", c.index);
  w.U("nr_pages", c.nr_pages);
  w.U("tgid", c.tgid);
  w.U("tid", c.tid);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_writeback& wb, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", wb.ts);
  w.Word("kind", WritebackKind(wb.kind));
  w.I("reason", static_cast<int64_t>(wb.reason) - 1);
  w.U("ino", wb.ino);
  w.U("dev", wb.dev);
  w.File("file_id", ctx.file);
  w.U("index", wb.index);
  w.U("nr", wb.nr);
  w.U("tgid", wb.tgid);
  w.U("tid", wb.tid);
  w.U("sync_mode", wb.sync_mode);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_block& b, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", b.ts);
  w.Word("phase", BlockPhaseName(b.phase));
  w.U("dev", b.dev);
  w.U("sector", b.sector);
  w.U("nr_sector", b.nr_sector);
  w.U("bytes", b.bytes);
  w.Text("rwbs", 32, [&](char* p) {
    const std::string rwbs = RwbsText(b.flags);
    std::memcpy(p, rwbs.data(), std::min<size_t>(rwbs.size(), 32));
    return p + std::min<size_t>(rwbs.size(), 32);
  });
  w.U("flags", b.flags);
  w.U("rq_id", b.rq_id);
  w.U("bio_id", b.bio_id);
  w.U("tgid", b.tgid);
  w.U("tid", b.tid);
  w.S("comm", Cstr(b.comm, sizeof b.comm), &t.scratch());
  w.I("error", b.error);
  w.U("cpu", b.cpu);
  w.U("ino", b.ino);
  w.U("ino_dev", b.ino_dev);
  w.File("file_id", ctx.file);
  w.U("aux", b.aux);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_nvme& n, const RowContext&) const {
  auto w = t.Begin();
  w.U("ts_ns", n.ts);
  w.Word("phase", NvmePhase(n.phase));
  w.U("ctrl_id", n.ctrl_id);
  w.U("dev", n.dev);
  w.U("nsid", n.nsid);
  w.U("qid", n.qid);
  w.U("cid", n.cid);
  w.U("opcode", n.opcode);
  w.U("slba", n.slba);
  w.U("nlb", n.nlb);
  w.U("lba_size", n.lba_size);
  w.U("status", n.status);
  w.U("result", n.result);
  w.U("rq_id", n.rq_id);
  w.U("cdw10", n.cdw10);
  w.U("cdw11", n.cdw11);
  w.U("cdw12", n.cdw12);
  w.U("fctype", n.fctype);
  w.U("flags", n.flags);
  w.U("retries", n.retries);
  w.U("cpu", n.cpu);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_async_io& a, const RowContext& ctx) const {
  const AsyncOpInfo op = AsyncOp(a.engine, a.opcode);
  auto w = t.Begin();
  w.U("ts_ns", a.ts);
  w.Word("engine", AsyncEngineName(a.engine));
  w.Word("phase", a.phase == IOT_AIO_SUBMIT ? "submit" : a.phase == IOT_AIO_COMPLETE ? "complete" : "?");
  w.U("opcode", a.opcode);
  w.Word("opcode_name", op.name);
  w.U("ctx", a.ctx);
  w.U("req_id", a.req_id);
  w.U("user_data", a.user_data);
  w.I("fd", a.fd);
  w.File("file_id", ctx.file);
  w.U("offset", a.offset);
  w.U("length", a.length);
  w.I("res", a.res);
  w.U("tgid", a.tgid);
  w.U("tid", a.tid);
  w.U("flags", a.flags);
  w.U("rw_flags", a.rw_flags);
  w.Names("rw_flags_names", names_, FlagSet::kRwf, a.rw_flags);
  w.U("cpu", a.cpu);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_intent& in, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", in.ts);
  w.Word("kind", IntentKind(in.kind));
  w.U("source", in.source);
  w.U("tgid", in.tgid);
  w.U("tid", in.tid);
  w.S("label", ctx.text[0], &t.scratch());
  w.U("value", in.value);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_lost& l, const RowContext&) const {
  auto w = t.Begin();
  w.U("ts_ns", l.ts);
  w.Word("source", SourceName(l.source));
  w.U("cpu", l.cpu);
  w.U("count", l.count);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_clock& c, const RowContext&) const {
  auto w = t.Begin();
  w.U("monotonic_ns", c.monotonic_ns);
  w.U("realtime_ns", c.realtime_ns);
  w.U("boottime_ns", c.boottime_ns);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_cache_state& c, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", c.ts);
  w.S("path", ctx.text[0], &t.scratch());
  w.U("ino", c.ino);
  w.U("dev", c.dev);
  w.File("file_id", ctx.file);
  w.U("fsize", c.fsize);
  w.U("resident_pages", c.resident_pages);
  w.U("total_pages", c.total_pages);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_subpage& s, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", s.ts);
  w.U("tgid", s.tgid);
  w.U("ino", s.ino);
  w.U("dev", s.dev);
  w.File("file_id", ctx.file);
  w.U("pgoff", s.pgoff);
  w.U("changed_words", s.changed_words);
  w.Text("bitmap_hex", sizeof s.bitmap * 2, [&](char* p) {
    static constexpr char kHex[] = "0123456789abcdef";
    for (uint64_t w : s.bitmap) {
      for (int shift = 60; shift >= 0; shift -= 4) *p++ = kHex[(w >> shift) & 0xf];
    }
    return p;
  });
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_sched& s, const RowContext&) const {
  auto w = t.Begin();
  w.U("ts_ns", s.ts);
  w.U("dur_ns", s.dur);
  w.Word("kind", SchedKind(s.kind));
  w.U("cpu", s.cpu);
  w.U("tgid", s.tgid);
  w.U("tid", s.tid);
  w.U("vec", s.vec);
  t.End(w);
}

// An iovec record carries the lengths of its buffers after its fixed part.
template <typename TableT>
void RowFormatter::Iovec(TableT& t, const iot_iovec& v, const iot_rec_hdr* h) const {
  const size_t have = (h->size - sizeof(iot_iovec)) / 8;
  const size_t n = std::min<size_t>(v.captured, have);
  const auto* lengths = reinterpret_cast<const uint8_t*>(h) + sizeof(iot_iovec);
  auto w = t.Begin();
  w.U("ts_ns", v.ts);
  w.U("tid", v.tid);
  w.U("count", v.count);
  w.Text("lengths", n * 21, [&](char* p) {
    for (size_t i = 0; i < n; i++) {
      uint64_t len;
      std::memcpy(&len, lengths + i * 8, 8);
      if (i) *p++ = ';';
      p = WriteU64(p, len);
    }
    return p;
  });
  t.End(w);
}

template void RowFormatter::Row<Table>(Table&, const iot_rec_hdr*, const RowContext&) const;
template void RowFormatter::Row<ColumnTable>(ColumnTable&, const iot_rec_hdr*,
                                             const RowContext&) const;

}  // namespace iotwin::interop::table_export
