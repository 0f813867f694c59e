#include "format/record_text.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "base/bytes_text.h"
#include "format/records.h"
#include "format/trace_reader.h"

namespace iotwin {
namespace {

// Names are bytes: written as text (base/bytes_text.h), so that a record stays one line of
// valid UTF-8 whatever its names hold.
std::string Str(const TraceReader* r, uint32_t id) {
  if (id == 0) return "-";
  if (!r || !r->HasString(id)) return fmt::format("#{}", id);
  return fmt::format("\"{}\"", BytesToText(r->String(id)));
}

std::string Comm(const char (&comm)[16]) {
  return BytesToText(std::string_view(comm, strnlen(comm, sizeof comm)));
}

}  // namespace

std::string RecordToText(const iot_rec_hdr* h, const TraceReader* r) {
  switch (h->type) {
    case IOT_REC_STRING: {
      const auto& s = As<iot_string>(h);
      return fmt::format("string id={} len={}{}", s.id, s.len,
                         s.flags & IOT_STRF_TRUNCATED ? " truncated" : "");
    }
    case IOT_REC_SYSCALL: {
      const auto& s = As<iot_syscall>(h);
      return fmt::format(
          "syscall ts={} dur={} tgid={} tid={} cpu={} {} fd={} fd2={} off={} len={} aux={} "
          "flags={:#x} mode={:#o} ret={} dev={}:{} ino={} ftype={} fsize={} path={} path2={} "
          "sflags={:#x}",
          s.ts, s.dur, s.tgid, s.tid, s.cpu, OpName(s.op), s.fd, s.fd2, s.offset, s.length, s.aux,
          s.flags, s.mode, s.ret, s.dev >> 20, s.dev & 0xfffff, s.ino, s.ftype, s.fsize,
          Str(r, s.path_id), Str(r, s.path2_id), s.sflags);
    }
    case IOT_REC_IOVEC: {
      const auto& v = As<iot_iovec>(h);
      std::string lens;
      const uint64_t* l = reinterpret_cast<const uint64_t*>(&v + 1);
      for (unsigned i = 0; i < v.captured; i++) lens += fmt::format("{}{}", i ? "," : "", l[i]);
      return fmt::format("iovec ts={} tid={} count={} lens=[{}]", v.ts, v.tid, v.count, lens);
    }
    case IOT_REC_FDLIST: {
      const auto& l = As<iot_fdlist>(h);
      std::string fds;
      const size_t have = (h->size - sizeof(iot_fdlist)) / sizeof(iot_fdlist_entry);
      const auto* e = reinterpret_cast<const iot_fdlist_entry*>(&l + 1);
      for (size_t i = 0; i < std::min<size_t>(l.captured, have); i++) {
        if (e[i].eflags & IOT_FDLE_IDENT) {
          fds += fmt::format("{}{}={}:{}/{} ftype={} flags={:#o}", i ? "," : "", e[i].fd,
                             e[i].dev >> 20, e[i].dev & 0xfffff, e[i].ino, e[i].ftype,
                             e[i].fflags);
        } else {
          fds += fmt::format("{}{}", i ? "," : "", e[i].fd);
        }
      }
      return fmt::format("fdlist ts={} tid={} kind={} count={} first={} flags={:#x} fds=[{}]",
                         l.ts, l.tid, l.kind, l.count, l.first, l.flags, fds);
    }
    case IOT_REC_PROC: {
      const auto& p = As<iot_proc>(h);
      static constexpr const char* kKinds[] = {"?",    "fork",   "thread", "exec",
                                               "exit", "attach", "cwd",    "start"};
      return fmt::format(
          "proc ts={} {} tgid={} tid={} child={}/{} clone_flags={:#x} exit={} path={} comm={} "
          "flags={:#x}",
          p.ts, p.kind < 8 ? kKinds[p.kind] : "?", p.tgid, p.tid, p.child_tgid, p.child_tid,
          p.clone_flags, p.exit_code, Str(r, p.path_id), Comm(p.comm), p.flags);
    }
    case IOT_REC_FD_SNAPSHOT: {
      const auto& f = As<iot_fd_snapshot>(h);
      return fmt::format("fd_snapshot ts={} tgid={} fd={} pos={} flags={:#o} dev={:#x} ino={} path={}",
                         f.ts, f.tgid, f.fd, f.pos, f.flags, f.dev, f.ino, Str(r, f.path_id));
    }
    case IOT_REC_MAP_SNAPSHOT: {
      const auto& m = As<iot_map_snapshot>(h);
      return fmt::format("map_snapshot ts={} tgid={} {:#x}-{:#x} pgoff={} prot={} flags={:#x} ino={} path={}",
                         m.ts, m.tgid, m.start, m.end, m.pgoff, m.prot, m.flags, m.ino,
                         Str(r, m.path_id));
    }
    case IOT_REC_PAGE_FAULT: {
      const auto& f = As<iot_page_fault>(h);
      return fmt::format("page_fault ts={} tgid={} tid={} addr={:#x} dev={:#x} ino={} pgoff={} flags={:#x} nr={} around={}",
                         f.ts, f.tgid, f.tid, f.addr, f.dev, f.ino, f.pgoff, f.flags, f.nr_pages,
                         f.around_start);
    }
    case IOT_REC_PAGE_CACHE: {
      const auto& c = As<iot_page_cache>(h);
      return fmt::format("page_cache ts={} kind={} dev={:#x} ino={} index={} nr={} tid={}", c.ts,
                         c.kind, c.dev, c.ino, c.index, c.nr_pages, c.tid);
    }
    case IOT_REC_WRITEBACK: {
      const auto& w = As<iot_writeback>(h);
      return fmt::format("writeback ts={} kind={} reason={} dev={:#x} ino={} index={} nr={} tid={}",
                         w.ts, w.kind, w.reason, w.dev, w.ino, w.index, w.nr, w.tid);
    }
    case IOT_REC_BLOCK: {
      const auto& b = As<iot_block>(h);
      return fmt::format(
          "block ts={} {} dev={}:{} sector={} nr={} bytes={} flags={:#x} rq={:#x} bio={:#x} tid={} "
          "err={} ino={} aux={}",
          b.ts, BlockPhaseName(b.phase), b.dev >> 20, b.dev & 0xfffff, b.sector, b.nr_sector,
          b.bytes, b.flags, b.rq_id, b.bio_id, b.tid, b.error, b.ino, b.aux);
    }
    case IOT_REC_NVME: {
      const auto& n = As<iot_nvme>(h);
      return fmt::format(
          "nvme ts={} phase={} ctrl={} qid={} cid={} nsid={} opcode={:#x} slba={} nlb={} status={:#x} "
          "lba_size={}",
          n.ts, n.phase, n.ctrl_id, n.qid, n.cid, n.nsid, n.opcode, n.slba, n.nlb, n.status,
          n.lba_size);
    }
    case IOT_REC_ASYNC_IO: {
      const auto& a = As<iot_async_io>(h);
      return fmt::format(
          "async_io ts={} engine={} phase={} opcode={} tgid={} tid={} fd={} off={} len={} "
          "user_data={:#x} req={:#x} res={}",
          a.ts, a.engine, a.phase, a.opcode, a.tgid, a.tid, a.fd, a.offset, a.length, a.user_data,
          a.req_id, a.res);
    }
    case IOT_REC_INTENT: {
      const auto& i = As<iot_intent>(h);
      return fmt::format("intent ts={} kind={} tgid={} tid={} label={} value={}", i.ts, i.kind,
                         i.tgid, i.tid, Str(r, i.label_id), i.value);
    }
    case IOT_REC_LOST: {
      const auto& l = As<iot_lost>(h);
      return fmt::format("lost ts={} source={} cpu={} count={}", l.ts, SourceName(l.source), l.cpu,
                         l.count);
    }
    case IOT_REC_CLOCK: {
      const auto& c = As<iot_clock>(h);
      return fmt::format("clock monotonic={} realtime={} boottime={}", c.monotonic_ns,
                         c.realtime_ns, c.boottime_ns);
    }
    case IOT_REC_CACHE_STATE: {
      const auto& c = As<iot_cache_state>(h);
      return fmt::format("cache_state ts={} dev={:#x} ino={} path={} resident={}/{}", c.ts, c.dev,
                         c.ino, Str(r, c.path_id), c.resident_pages, c.total_pages);
    }
    case IOT_REC_SUBPAGE: {
      const auto& s = As<iot_subpage>(h);
      return fmt::format("subpage ts={} dev={:#x} ino={} pgoff={} changed_words={}", s.ts, s.dev,
                         s.ino, s.pgoff, s.changed_words);
    }
    case IOT_REC_SCHED: {
      const auto& s = As<iot_sched>(h);
      return fmt::format("sched ts={} kind={} dur={} tid={} cpu={} vec={}", s.ts, s.kind, s.dur,
                         s.tid, s.cpu, s.vec);
    }
    default:
      return fmt::format("record type={} size={}", h->type, h->size);
  }
}

}  // namespace iotwin
