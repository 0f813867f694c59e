// `iotwin export --csv DIR` / `--jsonl DIR`: one table per record type, streamed in one pass,
// paths and labels resolved from the string table. Columns: docs/interop.md.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "base/bytes_text.h"
#include "format/op_info.h"
#include "format/records.h"
#include "format/trace_reader.h"
#include "interop/block_text.h"
#include "interop/exporters.h"
#include "interop/text_util.h"

namespace iotwin::interop {
namespace {

// One output table. A row is written field by field in a fixed order; the first row also
// collects the column names for the CSV header.
class Table {
 public:
  Table(std::string path, TableFormat format) : path_(std::move(path)), format_(format) {}
  ~Table() {
    if (f_) std::fclose(f_);
  }

  void U(const char* name, uint64_t v) {
    Key(name);
    fmt::format_to(std::back_inserter(row_), "{}", v);
  }
  void I(const char* name, int64_t v) {
    Key(name);
    fmt::format_to(std::back_inserter(row_), "{}", v);
  }
  void S(const char* name, std::string_view v) {
    Key(name);
    if (format_ == TableFormat::kCsv) {
      AppendBytesAsCsvField(&row_, v);
    } else {
      AppendBytesAsJsonString(&row_, v);
    }
  }

  Status End() {
    if (!f_) {
      f_ = std::fopen(path_.c_str(), "w");
      if (!f_) return Status::FromErrno(errno, "cannot create " + path_);
      if (format_ == TableFormat::kCsv) {
        for (size_t i = 0; i < names_.size(); i++) {
          if (i) buf_ += ',';
          buf_ += names_[i];
        }
        buf_ += '\n';
      }
    }
    header_known_ = true;
    if (format_ == TableFormat::kJsonl) row_ += '}';
    buf_ += row_;
    buf_ += '\n';
    row_.clear();
    first_field_ = true;
    rows_++;
    if (buf_.size() > (1u << 20)) return Flush();
    return Status::Ok();
  }

  Status Close() {
    if (!f_) return Status::Ok();
    IOTWIN_RETURN_IF_ERROR(Flush());
    int rc = std::fclose(f_);
    f_ = nullptr;
    if (rc != 0) return Status::FromErrno(errno, "cannot write " + path_);
    return Status::Ok();
  }
  uint64_t rows() const { return rows_; }

 private:
  void Key(const char* name) {
    if (!header_known_) names_.push_back(name);
    if (format_ == TableFormat::kCsv) {
      if (!first_field_) row_ += ',';
    } else {
      row_ += first_field_ ? "{\"" : ",\"";
      row_ += name;
      row_ += "\":";
    }
    first_field_ = false;
  }
  Status Flush() {
    if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size()) {
      return Status::FromErrno(errno, "cannot write " + path_);
    }
    buf_.clear();
    return Status::Ok();
  }

  std::string path_;
  TableFormat format_;
  FILE* f_ = nullptr;
  std::vector<const char*> names_;
  bool header_known_ = false;
  bool first_field_ = true;
  std::string row_, buf_;
  uint64_t rows_ = 0;
};

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

// The columns of each record type (docs/interop.md), in table order.
void Columns(Table& t, const iot_syscall& s, const TraceReader& r) {
  t.U("ts_ns", s.ts);
  t.U("dur_ns", s.dur);
  t.U("tgid", s.tgid);
  t.U("tid", s.tid);
  t.U("cpu", s.cpu);
  t.S("op", OpName(s.op));
  t.I("ret", s.ret);
  t.I("fd", s.fd);
  t.I("fd2", s.fd2);
  t.U("offset", s.offset);
  t.U("length", s.length);
  t.U("aux", s.aux);
  t.U("flags", s.flags);
  t.U("mode", s.mode);
  t.U("ino", s.ino);
  t.U("fsize", s.fsize);
  t.U("dev", s.dev);
  t.S("path", s.path_id ? r.String(s.path_id) : "");
  t.S("path2", s.path2_id ? r.String(s.path2_id) : "");
  t.U("ftype", s.ftype);
  t.U("sflags", s.sflags);
}

void Columns(Table& t, const iot_proc& p, const TraceReader& r) {
  t.U("ts_ns", p.ts);
  t.S("kind", ProcKind(p.kind));
  t.U("flags", p.flags);
  t.U("tgid", p.tgid);
  t.U("tid", p.tid);
  t.U("child_tgid", p.child_tgid);
  t.U("child_tid", p.child_tid);
  t.U("clone_flags", p.clone_flags);
  t.I("exit_code", p.exit_code);
  t.S("path", p.path_id ? r.String(p.path_id) : "");
  t.S("comm", Cstr(p.comm, sizeof p.comm));
}

void Columns(Table& t, const iot_fd_snapshot& s, const TraceReader& r) {
  t.U("ts_ns", s.ts);
  t.U("tgid", s.tgid);
  t.I("fd", s.fd);
  t.S("path", s.path_id ? r.String(s.path_id) : "");
  t.U("ino", s.ino);
  t.U("dev", s.dev);
  t.U("pos", s.pos);
  t.U("fsize", s.fsize);
  t.U("flags", s.flags);
  t.U("ftype", s.ftype);
}

void Columns(Table& t, const iot_map_snapshot& m, const TraceReader& r) {
  t.U("ts_ns", m.ts);
  t.U("tgid", m.tgid);
  t.U("start", m.start);
  t.U("end", m.end);
  t.U("pgoff", m.pgoff);
  t.U("ino", m.ino);
  t.U("dev", m.dev);
  t.S("path", m.path_id ? r.String(m.path_id) : "");
  t.U("prot", m.prot);
  t.U("flags", m.flags);
}

void Columns(Table& t, const iot_page_fault& f, const TraceReader&) {
  t.U("ts_ns", f.ts);
  t.U("tgid", f.tgid);
  t.U("tid", f.tid);
  t.U("cpu", f.cpu);
  t.U("addr", f.addr);
  t.U("ino", f.ino);
  t.U("dev", f.dev);
  t.U("pgoff", f.pgoff);
  t.U("nr_pages", f.nr_pages);
  t.U("write", (f.flags & IOT_PFF_WRITE) ? 1 : 0);
  t.U("major", (f.flags & IOT_PFF_MAJOR) ? 1 : 0);
  t.U("shared", (f.flags & IOT_PFF_SHARED) ? 1 : 0);
  t.U("exec", (f.flags & IOT_PFF_EXEC) ? 1 : 0);
}

void Columns(Table& t, const iot_page_cache& c, const TraceReader&) {
  t.U("ts_ns", c.ts);
  t.S("kind", PageCacheKind(c.kind));
  t.U("cpu", c.cpu);
  t.U("ino", c.ino);
  t.U("dev", c.dev);
  t.U("index", c.index);
  t.U("nr_pages", c.nr_pages);
  t.U("tgid", c.tgid);
  t.U("tid", c.tid);
}

void Columns(Table& t, const iot_writeback& w, const TraceReader&) {
  t.U("ts_ns", w.ts);
  t.S("kind", WritebackKind(w.kind));
  t.I("reason", static_cast<int64_t>(w.reason) - 1);
  t.U("ino", w.ino);
  t.U("dev", w.dev);
  t.U("index", w.index);
  t.U("nr", w.nr);
  t.U("tgid", w.tgid);
  t.U("tid", w.tid);
  t.U("sync_mode", w.sync_mode);
}

void Columns(Table& t, const iot_block& b, const TraceReader&) {
  t.U("ts_ns", b.ts);
  t.S("phase", BlockPhaseName(b.phase));
  t.U("dev", b.dev);
  t.U("sector", b.sector);
  t.U("nr_sector", b.nr_sector);
  t.U("bytes", b.bytes);
  t.S("rwbs", RwbsText(b.flags));
  t.U("flags", b.flags);
  t.U("rq_id", b.rq_id);
  t.U("bio_id", b.bio_id);
  t.U("tgid", b.tgid);
  t.U("tid", b.tid);
  t.S("comm", Cstr(b.comm, sizeof b.comm));
  t.I("error", b.error);
  t.U("cpu", b.cpu);
  t.U("ino", b.ino);
  t.U("ino_dev", b.ino_dev);
  t.U("aux", b.aux);
}

void Columns(Table& t, const iot_nvme& n, const TraceReader&) {
  t.U("ts_ns", n.ts);
  t.S("phase", NvmePhase(n.phase));
  t.U("ctrl_id", n.ctrl_id);
  t.U("dev", n.dev);
  t.U("nsid", n.nsid);
  t.U("qid", n.qid);
  t.U("cid", n.cid);
  t.U("opcode", n.opcode);
  t.U("slba", n.slba);
  t.U("nlb", n.nlb);
  t.U("lba_size", n.lba_size);
  t.U("status", n.status);
  t.U("result", n.result);
  t.U("rq_id", n.rq_id);
  t.U("cdw10", n.cdw10);
  t.U("cdw11", n.cdw11);
  t.U("cdw12", n.cdw12);
  t.U("fctype", n.fctype);
  t.U("flags", n.flags);
  t.U("retries", n.retries);
  t.U("cpu", n.cpu);
}

void Columns(Table& t, const iot_async_io& a, const TraceReader&) {
  t.U("ts_ns", a.ts);
  t.S("engine", AsyncEngineName(a.engine));
  t.S("phase", a.phase == IOT_AIO_SUBMIT ? "submit" : a.phase == IOT_AIO_COMPLETE ? "complete" : "?");
  t.U("opcode", a.opcode);
  t.U("ctx", a.ctx);
  t.U("req_id", a.req_id);
  t.U("user_data", a.user_data);
  t.I("fd", a.fd);
  t.U("offset", a.offset);
  t.U("length", a.length);
  t.I("res", a.res);
  t.U("tgid", a.tgid);
  t.U("tid", a.tid);
  t.U("flags", a.flags);
  t.U("rw_flags", a.rw_flags);
  t.U("cpu", a.cpu);
}

void Columns(Table& t, const iot_intent& in, const TraceReader& r) {
  t.U("ts_ns", in.ts);
  t.S("kind", IntentKind(in.kind));
  t.U("source", in.source);
  t.U("tgid", in.tgid);
  t.U("tid", in.tid);
  t.S("label", in.label_id ? r.String(in.label_id) : "");
  t.U("value", in.value);
}

void Columns(Table& t, const iot_lost& l, const TraceReader&) {
  t.U("ts_ns", l.ts);
  t.S("source", SourceName(l.source));
  t.U("cpu", l.cpu);
  t.U("count", l.count);
}

void Columns(Table& t, const iot_clock& c, const TraceReader&) {
  t.U("monotonic_ns", c.monotonic_ns);
  t.U("realtime_ns", c.realtime_ns);
  t.U("boottime_ns", c.boottime_ns);
}

void Columns(Table& t, const iot_cache_state& c, const TraceReader& r) {
  t.U("ts_ns", c.ts);
  t.S("path", c.path_id ? r.String(c.path_id) : "");
  t.U("ino", c.ino);
  t.U("dev", c.dev);
  t.U("fsize", c.fsize);
  t.U("resident_pages", c.resident_pages);
  t.U("total_pages", c.total_pages);
}

void Columns(Table& t, const iot_subpage& s, const TraceReader&) {
  t.U("ts_ns", s.ts);
  t.U("tgid", s.tgid);
  t.U("ino", s.ino);
  t.U("dev", s.dev);
  t.U("pgoff", s.pgoff);
  t.U("changed_words", s.changed_words);
  std::string bits;
  for (uint64_t w : s.bitmap) fmt::format_to(std::back_inserter(bits), "{:016x}", w);
  t.S("bitmap_hex", bits);
}

void Columns(Table& t, const iot_sched& s, const TraceReader&) {
  t.U("ts_ns", s.ts);
  t.U("dur_ns", s.dur);
  t.S("kind", SchedKind(s.kind));
  t.U("cpu", s.cpu);
  t.U("tgid", s.tgid);
  t.U("tid", s.tid);
  t.U("vec", s.vec);
}

// An iovec record carries the lengths of its buffers after its fixed part.
void Columns(Table& t, const iot_iovec& v, const iot_rec_hdr* h) {
  t.U("ts_ns", v.ts);
  t.U("tid", v.tid);
  t.U("count", v.count);
  std::string lens;
  size_t have = (h->size - sizeof(iot_iovec)) / 8;
  const auto* p = reinterpret_cast<const uint8_t*>(h) + sizeof(iot_iovec);
  for (size_t i = 0; i < std::min<size_t>(v.captured, have); i++) {
    uint64_t len;
    std::memcpy(&len, p + i * 8, 8);
    if (i) lens += ';';
    lens += std::to_string(len);
  }
  t.S("lengths", lens);
}

class Tables {
 public:
  Tables(std::string dir, TableFormat format) : dir_(std::move(dir)), format_(format) {}

  Table& Get(const char* stem) {
    for (auto& [name, t] : tables_) {
      if (name == stem) return *t;
    }
    std::string path = fmt::format("{}/{}.{}", dir_, stem, format_ == TableFormat::kCsv ? "csv" : "jsonl");
    tables_.emplace_back(stem, std::make_unique<Table>(path, format_));
    return *tables_.back().second;
  }

  // One row of the table of record `h`'s type; records of other types are left out.
  Status Row(const iot_rec_hdr* h, const TraceReader& r) {
    switch (h->type) {
      case IOT_REC_SYSCALL: return Write("syscalls", As<iot_syscall>(h), r);
      case IOT_REC_PROC: return Write("proc", As<iot_proc>(h), r);
      case IOT_REC_FD_SNAPSHOT: return Write("fd_snapshots", As<iot_fd_snapshot>(h), r);
      case IOT_REC_MAP_SNAPSHOT: return Write("map_snapshots", As<iot_map_snapshot>(h), r);
      case IOT_REC_PAGE_FAULT: return Write("page_faults", As<iot_page_fault>(h), r);
      case IOT_REC_PAGE_CACHE: return Write("page_cache", As<iot_page_cache>(h), r);
      case IOT_REC_WRITEBACK: return Write("writeback", As<iot_writeback>(h), r);
      case IOT_REC_BLOCK: return Write("block", As<iot_block>(h), r);
      case IOT_REC_NVME: return Write("nvme", As<iot_nvme>(h), r);
      case IOT_REC_ASYNC_IO: return Write("async_io", As<iot_async_io>(h), r);
      case IOT_REC_INTENT: return Write("intents", As<iot_intent>(h), r);
      case IOT_REC_LOST: return Write("lost", As<iot_lost>(h), r);
      case IOT_REC_CLOCK: return Write("clocks", As<iot_clock>(h), r);
      case IOT_REC_CACHE_STATE: return Write("cache_state", As<iot_cache_state>(h), r);
      case IOT_REC_SUBPAGE: return Write("subpage", As<iot_subpage>(h), r);
      case IOT_REC_SCHED: return Write("sched", As<iot_sched>(h), r);
      case IOT_REC_IOVEC: return Write("iovecs", As<iot_iovec>(h), h);
      default:
        return Status::Ok();
    }
  }

  template <typename Record, typename Context>
  Status Write(const char* stem, const Record& rec, const Context& context) {
    Table& t = Get(stem);
    Columns(t, rec, context);
    return t.End();
  }

  Status Close(TableExportResult* res) {
    for (auto& [name, t] : tables_) {
      IOTWIN_RETURN_IF_ERROR(t->Close());
      res->rows[name] = t->rows();
    }
    return Status::Ok();
  }

 private:
  std::string dir_;
  TableFormat format_;
  std::vector<std::pair<std::string, std::unique_ptr<Table>>> tables_;
};

}  // namespace

Result<TableExportResult> ExportTables(const std::string& trace, const std::string& dir,
                                       TableFormat format) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, "cannot create directory " + dir);
  }
  IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(trace));
  Tables tables(dir, format);
  for (;;) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* h, reader->Next());
    if (!h) break;
    IOTWIN_RETURN_IF_ERROR(tables.Row(h, *reader));
  }
  TableExportResult result;
  IOTWIN_RETURN_IF_ERROR(tables.Close(&result));
  // The header metadata and footer summary, for the context the tables leave out.
  nlohmann::json info;
  info["source"] = BytesToText(trace);
  info["meta"] = reader->meta();
  if (reader->summary()) info["summary"] = *reader->summary();
  info["tables"] = result.rows;
  std::string path = dir + "/trace_info.json";
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return Status::FromErrno(errno, "cannot create " + path);
  std::string text = info.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  size_t n = std::fwrite(text.data(), 1, text.size(), f);
  if (std::fclose(f) != 0 || n != text.size()) return Status::FromErrno(errno, "cannot write " + path);
  return result;
}

}  // namespace iotwin::interop
