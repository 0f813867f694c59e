// Importer for fio iolog v2 and v3 (fio's read_iolog/write_iolog format). Each iolog is one
// thread of one process: I/O lines become pread64/pwrite64/fsync/fdatasync/fallocate(punch hole)
// system calls on synthetic descriptors, file actions become openat/close.
#include <fcntl.h>
#include <linux/falloc.h>
#include <xxhash.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "base/checked_math.h"
#include "format/records.h"
#include "interop/importer.h"
#include "interop/text_util.h"

namespace iotwin::interop {
namespace {

constexpr uint32_t kDefaultTgid = 1000;  // imported iologs carry no pid: one synthetic process

class FioIologImporter : public Importer {
 public:
  using Importer::Importer;

  nlohmann::json Meta() const override {
    return {{"tool", "iotwin import (fio iolog)"},
            {"layers", {{"syscall", {{"enabled", true}, {"reason", "imported from fio iolog"}}}}}};
  }

  Status BeginSource(uint32_t index, std::string_view /*name*/) override {
    if (sources_.size() <= index) sources_.resize(index + 1);
    return Status::Ok();
  }

  std::optional<uint64_t> MergeKey(std::string_view text) const override {
    // Only v3 lines carry time; header and v2 lines keep their input's position.
    auto t = SplitWhitespace(text);
    if (t.size() != 3 && t.size() != 5) return std::nullopt;
    auto us = ParseDec(t[0]);
    if (!us || *us > UINT64_MAX / 1000) return std::nullopt;
    return *us * 1000;
  }

  Status Line(std::string_view text, const LinePos& pos) override {
    if (sources_.size() <= pos.source_index) sources_.resize(pos.source_index + 1);
    Source& src = sources_[pos.source_index];
    std::string_view t = Trim(text);
    if (src.version == 0) {
      if (StartsWith(t, "fio version 2 iolog")) {
        src.version = 2;
      } else if (StartsWith(t, "fio version 3 iolog")) {
        src.version = 3;
      } else {
        // fio refuses such a file; read on, guessing the version from the first line's shape.
        src.version = ParseDec(SplitWhitespace(t)[0]) ? 3 : 2;
        IOTWIN_RETURN_IF_ERROR(Unknown(pos, text, "missing 'fio version N iolog' header"));
        return Entry(src, pos, text);
      }
      stats_.comment_lines++;
      if (!clock_set_) {
        clock_set_ = true;
        if (src.version == 3) {
          sink_->SetClock({{"clock", "relative"}});
        } else {
          sink_->SetClock({{"clock", "synthetic"}});
        }
      }
      return Status::Ok();
    }
    return Entry(src, pos, text);
  }

  Status Finish() override {
    if (!clock_set_) sink_->SetClock({{"clock", "synthetic"}});
    return Status::Ok();
  }

 private:
  struct File {
    int32_t fd = -1;  // open descriptor, -1 when closed
    uint32_t path_id = 0;
    uint64_t ino = 0;
  };
  struct Source {
    int version = 0;
    uint64_t clock_ns = 0;  // v2: synthetic time
    std::unordered_map<std::string, File> files;
  };

  Status Entry(Source& src, const LinePos& pos, std::string_view text) {
    auto tok = SplitWhitespace(text);
    uint64_t ts;
    size_t k = 0;
    if (src.version == 3) {
      if (tok.size() != 3 && tok.size() != 5) return Unknown(pos, text, "v3 lines have 3 or 5 fields");
      auto us = ParseDec(tok[0]);
      if (!us || *us > UINT64_MAX / 1000) return Unknown(pos, text, "bad timestamp");
      ts = *us * 1000;
      k = 1;
    } else {
      if (tok.size() != 2 && tok.size() != 4) return Unknown(pos, text, "v2 lines have 2 or 4 fields");
      // v2 has no time: one microsecond per line, plus waits.
      src.clock_ns = SaturatingAdd(src.clock_ns, uint64_t{1000});
      ts = src.clock_ns;
    }
    uint32_t tid = (options_.pid ? options_.pid : kDefaultTgid) + pos.source_index;
    std::string name(tok[k]);
    if (name.find('\0') != std::string::npos) {
      return Unknown(pos, text, "file name holds a NUL byte (no system call can be given it)");
    }
    std::string_view act = tok[k + 1];
    if (tok.size() - k == 2) {
      if (act == "add") {
        stats_.counters["files_added"]++;
        return Status::Ok();
      }
      if (act == "open") return Open(src, name, ts, tid).status();
      if (act == "close") return Close(src, name, ts, tid);
      return Unknown(pos, text, "file action is not add/open/close");
    }
    auto off = ParseDec(tok[k + 2]);
    auto len = ParseDec(tok[k + 3]);
    if (!off || !len || *len > UINT32_MAX) return Unknown(pos, text, "bad offset or length");
    if (act == "wait") {
      // v2 only (fio ignores it in v3). The HOWTO says microseconds; taken as such.
      if (src.version == 3) return Unknown(pos, text, "wait is not valid in iolog v3");
      src.clock_ns = SaturatingAdd(src.clock_ns, SaturatingMul(*off, uint64_t{1000}));
      stats_.counters["waits"]++;
      return Status::Ok();
    }
    iot_syscall sc{};
    InitRecord(&sc, IOT_REC_SYSCALL);
    if (act == "read") {
      sc.op = IOT_OP_PREAD64;
    } else if (act == "write") {
      sc.op = IOT_OP_PWRITE64;
    } else if (act == "sync") {
      sc.op = IOT_OP_FSYNC;
    } else if (act == "datasync") {
      sc.op = IOT_OP_FDATASYNC;
    } else if (act == "trim") {
      // fio trims regular files with fallocate(PUNCH_HOLE | KEEP_SIZE).
      sc.op = IOT_OP_FALLOCATE;
      sc.mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
    } else {
      return Unknown(pos, text, "I/O action is not read/write/sync/datasync/trim");
    }
    File* f = Find(src, name);
    if (!f || f->fd < 0) {
      // fio opens files on first use when the log has no open line.
      stats_.counters["implicit_opens"]++;
      IOTWIN_ASSIGN_OR_RETURN(f, Open(src, name, ts, tid));
    }
    sc.ts = ts;
    sc.tgid = options_.pid ? options_.pid : kDefaultTgid;
    sc.tid = tid;
    sc.fd = f->fd;
    sc.fd2 = -1;
    sc.ino = f->ino;
    sc.ftype = 8;
    if (sc.op == IOT_OP_PREAD64 || sc.op == IOT_OP_PWRITE64 || sc.op == IOT_OP_FALLOCATE) {
      sc.offset = *off;
      sc.length = *len;
      sc.ret = sc.op == IOT_OP_FALLOCATE ? 0 : static_cast<int64_t>(*len);
    }
    return sink_->Append(sc);
  }

  File* Find(Source& src, const std::string& name) {
    auto it = src.files.find(name);
    return it == src.files.end() ? nullptr : &it->second;
  }

  Result<File*> Open(Source& src, const std::string& name, uint64_t ts, uint32_t tid) {
    File& f = src.files[name];
    if (f.fd >= 0) {
      stats_.counters["reopens"]++;
      return &f;
    }
    if (f.path_id == 0) {
      IOTWIN_ASSIGN_OR_RETURN(f.path_id, sink_->InternString(name));
      uint64_t h = XXH3_64bits(name.data(), name.size());
      f.ino = h ? h : 1;
    }
    f.fd = next_fd_++;
    iot_syscall sc{};
    InitRecord(&sc, IOT_REC_SYSCALL);
    sc.op = IOT_OP_OPENAT;
    sc.ts = ts;
    sc.tgid = options_.pid ? options_.pid : kDefaultTgid;
    sc.tid = tid;
    sc.fd = AT_FDCWD;
    sc.fd2 = -1;
    sc.flags = O_RDWR;
    sc.ret = f.fd;
    sc.path_id = f.path_id;
    sc.ino = f.ino;
    sc.ftype = 8;
    IOTWIN_RETURN_IF_ERROR(sink_->Append(sc));
    return &f;
  }

  Status Close(Source& src, const std::string& name, uint64_t ts, uint32_t tid) {
    File* f = Find(src, name);
    if (!f || f->fd < 0) {
      stats_.counters["close_without_open"]++;
      return Status::Ok();
    }
    iot_syscall sc{};
    InitRecord(&sc, IOT_REC_SYSCALL);
    sc.op = IOT_OP_CLOSE;
    sc.ts = ts;
    sc.tgid = options_.pid ? options_.pid : kDefaultTgid;
    sc.tid = tid;
    sc.fd = f->fd;
    sc.fd2 = -1;
    sc.ino = f->ino;
    sc.ftype = 8;
    f->fd = -1;
    return sink_->Append(sc);
  }

  std::vector<Source> sources_;
  int32_t next_fd_ = 3;
  bool clock_set_ = false;
};

}  // namespace

std::unique_ptr<Importer> MakeFioIologImporter(RecordSink* sink, const ImportOptions& options) {
  return std::make_unique<FioIologImporter>(sink, options);
}

}  // namespace iotwin::interop
