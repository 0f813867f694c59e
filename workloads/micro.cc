#include "micro.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

#include "rng.h"

namespace iotwin::workload {

namespace {

constexpr uint64_t kDefaultOps = 1024;
constexpr uint64_t kPrepareWriteSize = 1 * kMiB;

struct OpKind {
  bool write = false;
  bool positional = false;   // pread64/pwrite64 rather than read/write at the file position
  bool random_only = false;  // randread/randwrite
};

Result<OpKind> ResolveOp(const std::string& op) {
  if (op == "read") return OpKind{false, false, false};
  if (op == "write") return OpKind{true, false, false};
  if (op == "pread") return OpKind{false, true, false};
  if (op == "pwrite") return OpKind{true, true, false};
  if (op == "randread") return OpKind{false, true, true};
  if (op == "randwrite") return OpKind{true, true, true};
  return BadOption("--op {}: expected read, write, pread, pwrite, randread or randwrite", op);
}

// Block indices visited by one thread.
class OffsetSequence {
 public:
  OffsetSequence(AccessPattern p, uint64_t blocks, uint64_t seed, uint64_t stream)
      : p_(p), blocks_(blocks), rng_(seed, stream) {}

  uint64_t Next() {
    switch (p_.kind) {
      case AccessPattern::Kind::kSeq: {
        const uint64_t b = next_;
        next_ = (next_ + 1) % blocks_;
        return b;
      }
      case AccessPattern::Kind::kRand:
        return rng_.Below(blocks_);
      case AccessPattern::Kind::kStride: {
        // Pass k visits k, k+N, k+2N, ...; N passes cover every block once.
        const uint64_t b = next_;
        next_ += p_.stride;
        if (next_ >= blocks_) {
          pass_ = (pass_ + 1) % std::min(p_.stride, blocks_);
          next_ = pass_;
        }
        return b;
      }
    }
    return 0;
  }

 private:
  AccessPattern p_;
  uint64_t blocks_;
  Rng rng_;
  uint64_t next_ = 0;
  uint64_t pass_ = 0;
};

void SleepUntil(uint64_t deadline_ns) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(deadline_ns / 1000000000ULL);
  ts.tv_nsec = static_cast<long>(deadline_ns % 1000000000ULL);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

uint64_t FileKey(uint64_t seed, uint64_t file) {
  return Mix64(seed ^ 0x6d6963726fULL ^ Mix64(file));
}

}  // namespace

Result<AccessPattern> ParsePattern(const std::string& text) {
  AccessPattern p;
  if (text == "seq") return p;
  if (text == "rand") {
    p.kind = AccessPattern::Kind::kRand;
    return p;
  }
  if (text.rfind("stride:", 0) == 0) {
    const char* b = text.data() + 7;
    const char* e = text.data() + text.size();
    uint64_t n = 0;
    auto [ptr, ec] = std::from_chars(b, e, n);
    if (ec == std::errc() && ptr == e && n >= 1) {
      p.kind = AccessPattern::Kind::kStride;
      p.stride = n;
      return p;
    }
  }
  return BadOption("--pattern {}: expected seq, rand or stride:N with N >= 1", text);
}

Result<ScenarioResult> RunMicro(const MicroOptions& o, RunContext& ctx) {
  IOTWIN_ASSIGN_OR_RETURN(const OpKind kind, ResolveOp(o.op));
  std::string pattern_text = o.pattern.empty() ? (kind.random_only ? "rand" : "seq") : o.pattern;
  IOTWIN_ASSIGN_OR_RETURN(const AccessPattern pattern, ParsePattern(pattern_text));
  if (kind.random_only && pattern.kind != AccessPattern::Kind::kRand) {
    return BadOption("--op {} is random by definition; --pattern {} contradicts it (use --op {})",
                     o.op, o.pattern, kind.write ? "pwrite" : "pread");
  }
  if (o.size == 0 || o.size > 1024 * kMiB) return BadOption("--size must be in 1..1 GiB");
  if (o.file_mb == 0 || o.file_mb > 1024 * 1024)
    return BadOption("--file-mb must be in 1..1048576");
  const uint64_t file_bytes = o.file_mb * kMiB;
  if (o.size > file_bytes)
    return BadOption("--size {} is larger than the file (--file-mb {})", o.size, o.file_mb);
  if (o.direct && o.size % kDirectAlign != 0) {
    return BadOption("--direct needs --size to be a multiple of {} (got {})", kDirectAlign, o.size);
  }
  if (!(o.rate >= 0) || !(o.seconds >= 0) || !std::isfinite(o.rate)) {
    return BadOption("--rate and --seconds must be finite and >= 0");
  }
  const uint64_t ops = o.ops == 0 && o.seconds == 0 ? kDefaultOps : o.ops;
  const uint64_t blocks = file_bytes / o.size;

  const CommonOptions& c = ctx.common();
  ThreadIo& main = ctx.main();
  const int threads = c.threads;
  const std::string micro_dir = c.dir + "/micro";
  const int nfiles = o.per_thread_files ? threads : 1;
  auto file_path = [&](int f) {
    return o.per_thread_files ? fmt::format("{}/data.{}", micro_dir, f) : micro_dir + "/data";
  };
  IOTWIN_RETURN_IF_ERROR(ctx.EnsureDir(c.dir));
  IOTWIN_RETURN_IF_ERROR(ctx.EnsureDir(micro_dir));

  // Reads need data: create (or extend) the file(s) with deterministic content first.
  if (!kind.write) {
    bool began = false;
    AlignedBuffer* buf = nullptr;
    for (int f = 0; f < nfiles; f++) {
      const std::string path = file_path(f);
      struct stat st;
      const long s = main.Stat(path, &st);
      if (s == 0 && static_cast<uint64_t>(st.st_size) >= file_bytes) continue;
      if (s < 0 && s != -ENOENT) return SyscallError(s, "stat", path);
      if (!began) {
        main.Begin("micro.prepare");
        began = true;
        buf = &ctx.MainBuffer(kPrepareWriteSize);
      }
      const long fd = main.OpenAt(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0) return SyscallError(fd, "create", path);
      for (uint64_t off = 0; off < file_bytes; off += kPrepareWriteSize) {
        const size_t len = static_cast<size_t>(std::min(kPrepareWriteSize, file_bytes - off));
        FillPattern(FileKey(c.seed, static_cast<uint64_t>(f)), off, buf->data(), len);
        const long r = main.Pwrite(static_cast<int>(fd), buf->data(), len, off);
        if (r < 0 || static_cast<size_t>(r) != len) {
          main.Close(static_cast<int>(fd));
          return r < 0 ? SyscallError(r, "pwrite64", path) : Status::Io("{}: short write", path);
        }
      }
      const long r = main.Fsync(static_cast<int>(fd));
      main.Close(static_cast<int>(fd));
      if (r < 0) return SyscallError(r, "fsync", path);
    }
    if (began) main.End("micro.prepare");
  }

  const uint64_t start_ns = MonotonicNs();
  const uint64_t deadline_ns =
      o.seconds > 0 ? start_ns + static_cast<uint64_t>(o.seconds * 1e9) : UINT64_MAX;
  // Total rate R over T threads: thread t issues its op i at start + (i*T + t) / R.
  const double ns_per_slot = o.rate > 0 ? 1e9 / o.rate : 0;
  std::vector<uint64_t> done(static_cast<size_t>(threads));
  const size_t reserve = static_cast<size_t>(
      std::min<uint64_t>(ops ? ops * (kind.positional ? 1 : 2) : (1u << 16), 1u << 20) + 16);

  main.Begin("micro.run");
  IOTWIN_RETURN_IF_ERROR(ctx.Parallel(threads, reserve, [&](int t, ThreadIo& io) -> Status {
    const int f = o.per_thread_files ? t : 0;
    const std::string path = file_path(f);
    const int flags =
        (kind.write ? O_WRONLY | O_CREAT : O_RDONLY) | O_CLOEXEC | (o.direct ? O_DIRECT : 0);
    AlignedBuffer buf(static_cast<size_t>(o.size));
    if (kind.write)
      FillPattern(FileKey(c.seed, 1000 + static_cast<uint64_t>(t)), 0, buf.data(), o.size);
    OffsetSequence seq(pattern, blocks, c.seed, static_cast<uint64_t>(t));
    const long fd = io.OpenAt(path, flags, 0644);
    if (fd < 0) return o.direct ? DirectOpenError(fd, path) : SyscallError(fd, "open", path);
    Status st;
    uint64_t pos = 0;  // the fd's file position, for read/write
    uint64_t i = 0;
    for (; (ops == 0 || i < ops); i++) {
      if (deadline_ns != UINT64_MAX && MonotonicNs() >= deadline_ns) break;
      if (ns_per_slot > 0) {
        // Slow rates over many ops put the due time past 2^64 ns: it saturates (a double that
        // large does not convert to an integer).
        const double due = static_cast<double>(i * threads + t) * ns_per_slot;
        const uint64_t due_ns = due < 0x1p63 ? start_ns + static_cast<uint64_t>(due) : UINT64_MAX;
        if (deadline_ns != UINT64_MAX && due_ns >= deadline_ns) break;
        SleepUntil(due_ns);
      }
      const uint64_t off = seq.Next() * o.size;
      long r;
      if (kind.positional) {
        r = kind.write ? io.Pwrite(static_cast<int>(fd), buf.data(), o.size, off)
                       : io.Pread(static_cast<int>(fd), buf.data(), o.size, off);
      } else {
        if (pos != off) {
          const long s = io.Lseek(static_cast<int>(fd), off, SEEK_SET);
          if (s < 0) {
            st = SyscallError(s, "lseek", path);
            break;
          }
          pos = off;
        }
        r = kind.write ? io.Write(static_cast<int>(fd), buf.data(), o.size, pos)
                       : io.Read(static_cast<int>(fd), buf.data(), o.size, pos);
        if (r > 0) pos += static_cast<uint64_t>(r);
      }
      if (r < 0) {
        st = SyscallError(r, kind.write ? "write" : "read", path);
        break;
      }
      if (static_cast<uint64_t>(r) != o.size) {
        st = Status::Io("{}: short {} at offset {}: {} of {} bytes", path,
                        kind.write ? "write" : "read", off, r, o.size);
        break;
      }
    }
    done[static_cast<size_t>(t)] = i;
    const long cl = io.Close(static_cast<int>(fd));
    if (st.ok() && cl < 0) st = SyscallError(cl, "close", path);
    return st;
  }));
  main.End("micro.run");

  ScenarioResult result;
  result.files = static_cast<uint64_t>(nfiles);
  result.extra["op"] = o.op;
  result.extra["syscall"] =
      kind.positional ? (kind.write ? "pwrite64" : "pread64") : (kind.write ? "write" : "read");
  result.extra["size"] = o.size;
  result.extra["pattern"] = pattern_text;
  result.extra["direct"] = o.direct;
  result.extra["ops_per_thread"] = done;
  return result;
}

}  // namespace iotwin::workload
