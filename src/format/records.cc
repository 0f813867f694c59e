#include "format/records.h"

#include <array>
#include <string>
#include <unordered_map>

// The ABI must have no implicit padding: every byte on disk is a declared field.
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wpadded"
#include "iotwin_abi.h"
#pragma GCC diagnostic pop

namespace iotwin {
namespace {

constexpr std::array<std::string_view, IOT_OP_MAX + 1> kOpNames = {
    "unknown",       "open",         "openat",        "openat2",     "creat",
    "close",         "close_range",  "dup",           "dup2",        "dup3",
    "fcntl",         "read",         "write",         "pread64",     "pwrite64",
    "readv",         "writev",       "preadv",        "pwritev",     "preadv2",
    "pwritev2",      "lseek",        "fsync",         "fdatasync",   "sync_file_range",
    "syncfs",        "fallocate",    "ftruncate",     "truncate",    "fadvise64",
    "readahead",     "copy_file_range", "sendfile",   "splice",      "mmap",
    "munmap",        "mremap",       "msync",         "madvise",     "stat",
    "lstat",         "fstat",        "newfstatat",    "statx",       "getdents64",
    "mkdir",         "mkdirat",      "unlink",        "unlinkat",    "rmdir",
    "rename",        "renameat",     "renameat2",     "link",        "linkat",
    "symlink",       "symlinkat",    "chdir",         "fchdir",      "io_setup",
    "io_submit",     "io_getevents", "io_destroy",    "io_uring_setup", "io_uring_enter",
    "io_uring_register", "sync",     "io_pgetevents", "flock",
};
static_assert(kOpNames[IOT_OP_PREAD64] == "pread64");
static_assert(kOpNames[IOT_OP_MMAP] == "mmap");
static_assert(kOpNames[IOT_OP_IO_URING_REGISTER] == "io_uring_register");
static_assert(kOpNames[IOT_OP_IO_PGETEVENTS] == "io_pgetevents");
static_assert(kOpNames[IOT_OP_FLOCK] == "flock");

struct TypeInfo {
  std::string_view name;
  size_t size;
};
constexpr std::array<TypeInfo, IOT_REC_MAX + 1> kTypes = {{
    {"unknown", 0},
    {"string", sizeof(iot_string)},
    {"syscall", sizeof(iot_syscall)},
    {"proc", sizeof(iot_proc)},
    {"fd_snapshot", sizeof(iot_fd_snapshot)},
    {"map_snapshot", sizeof(iot_map_snapshot)},
    {"page_fault", sizeof(iot_page_fault)},
    {"page_cache", sizeof(iot_page_cache)},
    {"writeback", sizeof(iot_writeback)},
    {"block", sizeof(iot_block)},
    {"nvme", sizeof(iot_nvme)},
    {"async_io", sizeof(iot_async_io)},
    {"intent", sizeof(iot_intent)},
    {"lost", sizeof(iot_lost)},
    {"clock", sizeof(iot_clock)},
    {"cache_state", sizeof(iot_cache_state)},
    {"subpage", sizeof(iot_subpage)},
    {"sched", sizeof(iot_sched)},
    {"iovec", sizeof(iot_iovec)},
}};

}  // namespace

size_t RecordFixedSize(uint16_t type) { return type <= IOT_REC_MAX ? kTypes[type].size : 0; }

std::string_view RecordTypeName(uint16_t type) {
  return type <= IOT_REC_MAX ? kTypes[type].name : "unknown";
}

std::string_view OpName(uint16_t op) { return op <= IOT_OP_MAX ? kOpNames[op] : "unknown"; }

std::optional<uint16_t> OpFromName(std::string_view name) {
  for (size_t i = 1; i < kOpNames.size(); i++) {
    if (kOpNames[i] == name) return static_cast<uint16_t>(i);
  }
  return std::nullopt;
}

bool OpIsRead(uint16_t op) {
  return op == IOT_OP_READ || op == IOT_OP_PREAD64 || op == IOT_OP_READV ||
         op == IOT_OP_PREADV || op == IOT_OP_PREADV2;
}

bool OpIsWrite(uint16_t op) {
  return op == IOT_OP_WRITE || op == IOT_OP_PWRITE64 || op == IOT_OP_WRITEV ||
         op == IOT_OP_PWRITEV || op == IOT_OP_PWRITEV2;
}

bool OpOpensFd(uint16_t op) {
  return op == IOT_OP_OPEN || op == IOT_OP_OPENAT || op == IOT_OP_OPENAT2 || op == IOT_OP_CREAT;
}

bool OpHasExplicitOffset(uint16_t op) {
  return op == IOT_OP_PREAD64 || op == IOT_OP_PWRITE64 || op == IOT_OP_PREADV ||
         op == IOT_OP_PWRITEV || op == IOT_OP_PREADV2 || op == IOT_OP_PWRITEV2;
}

std::string_view SourceName(uint16_t source) {
  static constexpr std::array<std::string_view, IOT_SRC_MAX + 1> kNames = {
      "unknown", "syscall", "proc", "memory", "block", "nvme", "async", "sched", "intent", "join"};
  return source <= IOT_SRC_MAX ? kNames[source] : "unknown";
}

std::string_view BlockPhaseName(uint16_t phase) {
  static constexpr std::array<std::string_view, 13> kNames = {
      "?", "Q", "X", "M", "F", "A", "G", "I", "D", "C", "R", "rq_merge", "bio_complete"};
  return phase < kNames.size() ? kNames[phase] : "?";
}

}  // namespace iotwin
