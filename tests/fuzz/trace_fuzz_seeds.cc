// Writes the seed inputs of the trace-consumer fuzz targets (model, report, layers, compare,
// replay plan) in the layout of trace_fuzz_util.h, from small hand-written workloads built with
// the tests' TraceBuilder: file I/O, processes and mappings, async I/O, the block and NVMe
// layers with their header facts, and damaged or unusual traces; and the trace files of
// trace_reader_fuzz (and of the Python module's fuzz test) that TraceWriter would never write.
//
//   trace_fuzz_seeds DIR    writes DIR/<target>/<name> and DIR/<name>.iotwin
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "../unit/raw_trace_file.h"
#include "../unit/trace_builder.h"
#include "trace_fuzz_util.h"

namespace {

using iotwin::fuzz::Encoder;
using iotwin::test::TraceBuilder;

constexpr uint32_t kPid = 100;
constexpr uint32_t kDev = 259u << 20;  // nvme0n1
constexpr uint8_t kUringRead = 22;      // IORING_OP_READ

void Add(Encoder* e, const TraceBuilder& b) {
  for (const auto& r : b.records()) e->Record(reinterpret_cast<const iot_rec_hdr*>(r.data()));
}

template <typename T>
void AddRecord(Encoder* e, T rec, uint16_t type) {
  iotwin::InitRecord(&rec, type);
  e->Record(&rec.hdr);
}

// Plain file I/O of one process: relative and absolute opens, positioned and sequential data
// calls, a vectored read, descriptor copies, namespace changes.
void FileIo(TraceBuilder& b) {
  b.Proc(IOT_PROC_START, kPid, kPid);
  b.Cwd(kPid, "/data");
  b.PathOp(kPid, IOT_OP_MKDIR, "out", 0);
  b.Openat(kPid, "in.bin", O_RDONLY, 3, 1 << 20);
  b.Pread(kPid, 3, 0, 4096, 4096, 1 << 20);
  b.Read(kPid, 3, 8192, 8192, 1 << 20);
  b.Lseek(kPid, 3, 65536, SEEK_SET, 65536);
  b.Vectored(kPid, IOT_OP_READV, 3, 0, {512, 1024, 2048}, 3584);
  b.Dup(kPid, 3, 4);
  b.Close(kPid, 3);
  b.Openat(kPid, "/data/out/log", O_WRONLY | O_CREAT | O_APPEND, 5);
  b.Write(kPid, 5, 100, 100);
  b.Pwrite(kPid, 5, 4096, 4096, 4096);
  b.FdOp(kPid, IOT_OP_FSYNC, 5);
  b.Dup2(kPid, 5, 9, 9);
  b.Fcntl(kPid, 9, F_DUPFD_CLOEXEC, 20, 20);
  b.Path2Op(kPid, IOT_OP_RENAME, "/data/out/log", "/data/out/log.1");
  b.PathOp(kPid, IOT_OP_STAT, "/data/out/log.1", 0);
  b.PathOp(kPid, IOT_OP_UNLINK, "/data/in.bin", 0);
  b.Openat(kPid, "/data/out", O_RDONLY | O_DIRECTORY, 6);
  b.FdOp(kPid, IOT_OP_GETDENTS64, 6, 48);
  b.CloseRange(kPid, 3, ~0u);
  b.Exit(kPid, true);
}

// Processes, threads and mappings: fork, a thread, exec, mmap with faults, munmap, msync.
void Processes(TraceBuilder& b) {
  b.Attach(kPid, "/srv");
  b.FdSnapshot(kPid, 7, "/srv/db", O_RDWR, 4096, 1 << 16);
  b.CacheState("/srv/db", 1 << 16, 4, 16);
  b.Fork(kPid, 200);
  b.NewThread(200, 201);
  b.Openat(201, "/srv/db", O_RDWR, 3, 1 << 16);
  b.Mmap(201, 3, 0, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, 0x7f0000000000);
  b.Fault(201, 0x7f0000001000, false, 1, 1001);
  b.Fault(201, 0x7f0000002000, true, 2, 1001);
  b.MemOp(201, IOT_OP_MSYNC, 0x7f0000000000, 1 << 16, 0, MS_SYNC);
  b.MemOp(201, IOT_OP_MUNMAP, 0x7f0000000000, 1 << 16);
  b.Pread(kPid, 7, 0, 4096, 4096, 1 << 16);
  b.Exec(200, "/usr/bin/tool");
  b.Exit(201, false);
  b.Exit(200, true);
}

// io_uring requests submitted and reaped by one io_uring_enter, then a libaio batch.
void Async(TraceBuilder& b) {
  b.Proc(IOT_PROC_START, kPid, kPid);
  b.Syscall(kPid, IOT_OP_IO_URING_SETUP, 5).length = 8;
  b.Openat(kPid, "/d/f", O_RDONLY | O_DIRECT, 3, 1 << 20);
  uint64_t t = b.now() + 100'000;
  for (int k = 0; k < 3; k++) {
    b.SetTime(t + 1'000 + k * 100);
    b.Async(kPid, IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, kUringRead, 9, k + 1, 3, k * 4096, 4096);
  }
  for (int k = 0; k < 3; k++) {
    b.SetTime(t + 20'000 + k * 100);
    b.Async(kPid, IOT_AIO_ENGINE_URING, IOT_AIO_COMPLETE, kUringRead, 9, k + 1, 3, k * 4096, 4096,
            4096);
  }
  b.dur = 50'000;
  b.SetTime(t);
  auto& enter = b.Syscall(kPid, IOT_OP_IO_URING_ENTER, 3);
  enter.fd = 5;
  enter.flags = 1;  // IORING_ENTER_GETEVENTS
  b.dur = 1'000;
  b.SetTime(t + 200'000);
  auto& setup = b.Syscall(kPid, IOT_OP_IO_SETUP, 0);
  setup.length = 4;
  setup.aux = 0x5000;
  b.Async(kPid, IOT_AIO_ENGINE_LIBAIO, IOT_AIO_SUBMIT, 0, 0x5000, 77, 3, 0, 4096);
  b.Syscall(kPid, IOT_OP_IO_SUBMIT, 1).fd = -1;
  b.Async(kPid, IOT_AIO_ENGINE_LIBAIO, IOT_AIO_COMPLETE, 0, 0x5000, 77, 3, 0, 4096, 4096);
  b.Syscall(kPid, IOT_OP_IO_GETEVENTS, 1).aux = 1;
  b.Close(kPid, 3);
  b.Close(kPid, 5);
}

// Descriptor lists: a ring's registered files (a registration, then an update) named by
// IOSQE_FIXED_FILE requests, and a descriptor another process receives by SCM_RIGHTS.
void FdLists(TraceBuilder& b) {
  constexpr uint32_t kChild = kPid + 1;
  b.Proc(IOT_PROC_START, kPid, kPid);
  b.Syscall(kPid, IOT_OP_IO_URING_SETUP, 5).length = 8;
  auto& open = b.Openat(kPid, "/d/f", O_RDWR, 3, 1 << 20);
  open.dev = kDev;
  const uint64_t ino = open.ino;
  auto& reg = b.Syscall(kPid, IOT_OP_IO_URING_REGISTER, 0);
  reg.fd = 5;
  reg.mode = 2;  // IORING_REGISTER_FILES
  b.FdList(IOT_FDL_URING_FILES, {3, -1}, {ino, 0}, 0, kDev);
  auto& upd = b.Syscall(kPid, IOT_OP_IO_URING_REGISTER, 1);
  upd.fd = 5;
  upd.mode = 6;  // IORING_REGISTER_FILES_UPDATE
  b.FdList(IOT_FDL_URING_FILES, {3}, {ino}, 1, kDev);
  auto& enter = b.Syscall(kPid, IOT_OP_IO_URING_ENTER, 2);
  enter.fd = 5;
  for (uint64_t k = 0; k < 2; k++) {
    b.Async(kPid, IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, kUringRead, 9, k + 1, static_cast<int>(k),
            k * 4096, 4096).flags = 1;  // IOSQE_FIXED_FILE
    b.Async(kPid, IOT_AIO_ENGINE_URING, IOT_AIO_COMPLETE, kUringRead, 9, k + 1, 0, k * 4096, 4096,
            4096);
  }
  b.Fork(kPid, kChild);
  b.Syscall(kChild, IOT_OP_RECVMSG, 1).fd = 4;
  b.FdList(IOT_FDL_RECEIVED, {6}, {ino}, 0, kDev);
  b.Pread(kChild, 6, 0, 4096, 4096, 1 << 20);
  b.Close(kChild, 6);
  b.Close(kPid, 3);
}

// A direct read that became two block requests (a split bio), each an NVMe command, plus
// interference, write-back, page-cache and memory-layer records.
void Block(Encoder* e) {
  TraceBuilder b;
  b.Proc(IOT_PROC_START, kPid, kPid);
  auto& open = b.Openat(kPid, "/mnt/f", O_RDONLY | O_DIRECT, 3, 1 << 20);
  open.dev = kDev;
  b.SetTime(10'000'000);
  b.dur = 90'000;
  auto& rd = b.Pread(kPid, 3, 0, 262144, 262144, 1 << 20);
  rd.dev = kDev;
  rd.ino = 1001;
  Add(e, b);
  const uint64_t t0 = 10'000'000;
  auto block = [&](uint16_t phase, uint64_t ts, uint64_t rq, uint64_t bio, uint64_t sector,
                   uint32_t bytes, uint64_t aux = 0, uint64_t parent = 0) {
    iot_block r{};
    r.phase = phase;
    r.ts = t0 + ts;
    r.sector = sector;
    r.rq_id = rq;
    r.bio_id = bio;
    r.bytes = bytes;
    r.nr_sector = bytes / 512;
    r.dev = kDev;
    r.flags = IOT_BLKF_READ | IOT_BLKF_SYNC;
    r.tgid = r.tid = phase == IOT_BLK_QUEUE ? kPid : 0;
    r.aux = aux;
    r.parent_id = parent;
    r.ino = 1001;
    r.ino_dev = kDev;
    std::memcpy(r.comm, "reader", 6);
    AddRecord(e, r, IOT_REC_BLOCK);
  };
  auto nvme = [&](uint16_t phase, uint64_t ts, uint64_t rq, uint64_t slba, uint32_t nlb,
                  uint16_t cid) {
    iot_nvme n{};
    n.phase = phase;
    n.ts = t0 + ts;
    n.rq_id = rq;
    n.opcode = 0x02;
    n.slba = slba;
    n.nlb = nlb;
    n.qid = 1;
    n.cid = cid;
    n.lba_size = 4096;
    n.dev = kDev;
    n.nsid = 1;
    AddRecord(e, n, IOT_REC_NVME);
  };
  block(IOT_BLK_QUEUE, 1'000, 0, 1, 0, 262144);
  block(IOT_BLK_SPLIT, 2'000, 0, 1, 0, 131072, 256, 0);
  block(IOT_BLK_GETRQ, 3'000, 1, 1, 0, 131072);
  block(IOT_BLK_GETRQ, 3'500, 2, 2, 256, 131072, 0, 1);
  block(IOT_BLK_ISSUE, 4'000, 1, 0, 0, 131072);
  nvme(IOT_NVME_SETUP, 4'500, 1, 0, 32, 7);
  block(IOT_BLK_ISSUE, 5'000, 2, 0, 256, 131072);
  nvme(IOT_NVME_SETUP, 5'500, 2, 32, 32, 8);
  nvme(IOT_NVME_COMPLETE, 60'000, 1, 0, 32, 7);
  block(IOT_BLK_COMPLETE, 61'000, 1, 0, 0, 131072);
  nvme(IOT_NVME_COMPLETE, 70'000, 2, 32, 32, 8);
  block(IOT_BLK_COMPLETE, 71'000, 2, 0, 256, 131072);
  iot_sched s{};
  s.kind = IOT_SCHED_OFFCPU;
  s.ts = t0 + 6'000;
  s.dur = 50'000;
  s.tgid = s.tid = kPid;
  AddRecord(e, s, IOT_REC_SCHED);
  iot_page_cache pc{};
  pc.kind = IOT_PC_ADD;
  pc.ts = t0 + 80'000;
  pc.ino = 1001;
  pc.index = 64;
  pc.nr_pages = 4;
  pc.dev = kDev;
  pc.tgid = pc.tid = kPid;
  AddRecord(e, pc, IOT_REC_PAGE_CACHE);
  iot_writeback wb{};
  wb.kind = IOT_WB_DIRTY_FOLIO;
  wb.ts = t0 + 81'000;
  wb.ino = 1001;
  wb.index = 64;
  wb.nr = 1;
  wb.dev = kDev;
  wb.tgid = wb.tid = kPid;
  AddRecord(e, wb, IOT_REC_WRITEBACK);
  iot_subpage sp{};
  sp.tgid = kPid;
  sp.ts = t0 + 82'000;
  sp.ino = 1001;
  sp.pgoff = 64;
  sp.dev = kDev;
  sp.changed_words = 1;
  sp.bitmap[0] = 1;
  AddRecord(e, sp, IOT_REC_SUBPAGE);
  iot_intent in{};
  in.kind = IOT_INTENT_INSTANT;
  in.source = IOT_INTENT_SRC_MARKER;
  in.ts = t0 + 83'000;
  in.tgid = in.tid = kPid;
  AddRecord(e, in, IOT_REC_INTENT);
  iot_clock c{};
  c.monotonic_ns = t0;
  c.realtime_ns = 1'700'000'000'000'000'000;
  c.boottime_ns = t0 + 5;
  AddRecord(e, c, IOT_REC_CLOCK);
  iot_lost lost{};
  lost.source = IOT_SRC_BLOCK;
  lost.ts = t0 + 90'000;
  lost.count = 2;
  AddRecord(e, lost, IOT_REC_LOST);
  e->Meta("block_devices/nvme0n1", {{"dev", "259:0"},
                                    {"max_sectors_kb", 128},
                                    {"max_segments", 127},
                                    {"max_segment_size", 65536},
                                    {"logical_block_size", 4096}});
  e->Summary("lost", {{"block", 2}});
}

// Records a reader must take as they come: short and long records, an unknown type, a string
// redefined, strings spread over small chunks.
void Unusual(Encoder* e) {
  TraceBuilder b;
  FileIo(b);
  size_t n = 0;
  for (const auto& r : b.records()) {
    e->Record(reinterpret_cast<const iot_rec_hdr*>(r.data()));
    if (++n % 7 == 0) e->Flush();
  }
  iot_syscall sc{};
  sc.op = IOT_OP_PREAD64;
  sc.tgid = sc.tid = kPid;
  sc.fd = 4;
  iotwin::InitRecord(&sc, IOT_REC_SYSCALL);
  sc.hdr.size = 40;  // an older writer's shorter record
  e->Record(&sc.hdr);
  std::vector<uint8_t> unknown(24, 0xab);
  reinterpret_cast<iot_rec_hdr*>(unknown.data())->type = 25;
  reinterpret_cast<iot_rec_hdr*>(unknown.data())->size = 24;
  e->Record(reinterpret_cast<const iot_rec_hdr*>(unknown.data()));
}

// File I/O whose last open names a path by an id no STRING record defines: consumers read it
// as "no name" (the CLI's "#id" or ""), never as another string or a crash.
void UndefinedStringId(TraceBuilder& b) {
  FileIo(b);
  iot_syscall& open = b.Syscall(kPid, IOT_OP_OPENAT, 7);
  open.fd = -100;
  open.flags = O_RDONLY;
  open.path_id = 4242;
  open.ino = 4242;
  b.Read(kPid, 7, 4096, 4096);
}

// Levels of nested arrays in the header's and footer's JSON: past the readers' bound of 128
// (base/json_parse.h), and small enough to keep as seed files.
constexpr uint16_t kNestedLevels = 1000;

bool WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  return static_cast<bool>(out);
}

// DIR/*.iotwin: whole trace files for trace_reader_fuzz, which mutates files.
bool WriteRawSeeds(const std::string& dir) {
  TraceBuilder b;
  UndefinedStringId(b);
  bool ok = b.WriteFile(dir + "/undefined_string_id.iotwin").ok();
  ok &= WriteFile(dir + "/nested_header.iotwin",
                  iotwin::test::RawTraceBytes(iotwin::test::NestedJson(kNestedLevels)));
  ok &= WriteFile(dir + "/nested_footer.iotwin",
                  iotwin::test::RawTraceBytes("{\"tool\": \"seed\"}",
                                              iotwin::test::NestedJson(kNestedLevels)));
  return ok;
}

bool WriteSeed(const std::string& dir, const std::string& target, const std::string& name,
               const std::string& bytes) {
  std::string d = dir + "/" + target;
  if (mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) return false;
  std::ofstream out(d + "/" + name, std::ios::binary | std::ios::trunc);
  out << bytes;
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: trace_fuzz_seeds DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  // Writer byte: 0 packed shaped chunks with a footer; 4 small chunks; 8 no footer (truncated).
  auto workload = [](uint8_t options, uint8_t writer, void (*build)(TraceBuilder&)) {
    Encoder e(options, writer);
    TraceBuilder b;
    build(b);
    Add(&e, b);
    return e.bytes();
  };
  auto block = [](uint8_t options, uint8_t writer) {
    Encoder e(options, writer);
    Block(&e);
    return e.bytes();
  };
  auto unusual = [](uint8_t options, uint8_t writer) {
    Encoder e(options, writer);
    Unusual(&e);
    return e.bytes();
  };
  // File I/O with header or footer JSON nested past the readers' bound.
  auto nested = [](uint8_t options, bool header) {
    Encoder e(options, 0);
    TraceBuilder b;
    FileIo(b);
    Add(&e, b);
    if (header) {
      e.MetaNested("host/hostname", kNestedLevels);
    } else {
      e.SummaryNested("lost", kNestedLevels);
    }
    return e.bytes();
  };
  bool ok = true;
  for (const char* target : {"model_fuzz", "report_fuzz", "layers_fuzz", "replay_plan_fuzz"}) {
    const bool replay = std::string(target) == "replay_plan_fuzz";
    const uint8_t opt = replay ? 0x40 : 0x01;  // force / dependencies, salvage, every request
    ok &= WriteSeed(dir, target, "file_io", workload(opt, 0, FileIo));
    ok &= WriteSeed(dir, target, "processes", workload(opt | 2, 4, Processes));
    ok &= WriteSeed(dir, target, "async", workload(opt, 1, Async));
    ok &= WriteSeed(dir, target, "fdlists", workload(opt, 0, FdLists));
    ok &= WriteSeed(dir, target, "block", block(opt, 2));
    ok &= WriteSeed(dir, target, "unusual_truncated", unusual(opt, 4 | 8));
    ok &= WriteSeed(dir, target, "undefined_string_id", workload(opt, 0, UndefinedStringId));
    ok &= WriteSeed(dir, target, "nested_header", nested(opt, true));
    ok &= WriteSeed(dir, target, "nested_footer", nested(opt, false));
  }
  ok &= WriteRawSeeds(dir);
  // compare: a trace with itself, and an original against a replay of it with other timing.
  ok &= WriteSeed(dir, "compare_fuzz", "self_file_io", workload(0, 0, FileIo));
  ok &= WriteSeed(dir, "compare_fuzz", "self_async", workload(2, 0, Async));
  ok &= WriteSeed(dir, "compare_fuzz", "self_block", block(0, 0));
  {
    Encoder e(0, 0);
    TraceBuilder a;
    FileIo(a);
    Add(&e, a);
    e.NextTrace(4);
    TraceBuilder r;
    r.step = 12'000;
    FileIo(r);
    Add(&e, r);
    e.Meta("replay", {{"source", "original.iotwin"}, {"pace", "original"}});
    ok &= WriteSeed(dir, "compare_fuzz", "replay_of_file_io", e.bytes());
  }
  {
    Encoder e(8, 0);
    TraceBuilder a;
    Processes(a);
    Add(&e, a);
    e.NextTrace(8);
    TraceBuilder r;
    Async(r);
    Add(&e, r);
    e.Meta("replay", {{"source", "x"}, {"pace", "fast"}});
    ok &= WriteSeed(dir, "compare_fuzz", "unrelated", e.bytes());
  }
  ok &= WriteSeed(dir, "compare_fuzz", "undefined_string_id", workload(0, 0, UndefinedStringId));
  ok &= WriteSeed(dir, "compare_fuzz", "nested_header", nested(0, true));
  if (!ok) {
    std::fprintf(stderr, "trace_fuzz_seeds: cannot write under %s\n", dir.c_str());
    return 1;
  }
  return 0;
}
