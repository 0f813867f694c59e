// Lexical path handling for traced paths: the trace records paths as the program passed them
// (relative or absolute, with "." and ".."), and everything downstream (file sets, ordering,
// re-rooting in replay) needs one canonical absolute spelling per name. None of these functions
// touches the file system: the traced machine's file system is not the one we run on.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace iotwin::model {

// Normalises an absolute path lexically: collapses repeated '/', drops "." components, resolves
// ".." against the preceding component (".." at the root stays at the root, as the kernel does)
// and removes a trailing '/'. A relative input is taken relative to "/". The result always starts
// with '/' and never contains "." or ".." components, so a path built from it cannot climb out of
// a prefix it is appended to. (It can differ from the kernel's resolution when a component is a
// symlink: "link/.." is the link's parent here; replay only ever hands normalised paths to the
// kernel and rewrites symlink targets, so the kernel never resolves ".." itself.)
std::string NormalizePath(std::string_view path);

// Resolves `path` as the traced program's kernel would: absolute paths stand alone, relative ones
// are taken relative to `base` (an absolute directory: the cwd or a dirfd's path). Normalised.
std::string ResolvePath(std::string_view base, std::string_view path);

// Parent directory of a normalised absolute path ("/" for "/" and "/a").
std::string_view ParentPath(std::string_view normalized);
// Last component of a normalised absolute path ("" for "/").
std::string_view BaseName(std::string_view normalized);

// True when normalised `path` equals `prefix` or lies below it, component-wise ("/ab" is not
// within "/a").
bool PathIsWithin(std::string_view path, std::string_view prefix);

// `path` with leading `prefix` (component-wise, see PathIsWithin) replaced by `replacement`.
// Both `path` and `prefix` normalised; `replacement` is used verbatim (no trailing '/').
std::string ReplacePrefix(std::string_view path, std::string_view prefix,
                          std::string_view replacement);

// `to` as a relative path from directory `from_dir` (both normalised absolute paths):
// RelativePath("/a/b", "/a/c/d") is "../c/d"; "." when they are the same.
std::string RelativePath(std::string_view from_dir, std::string_view to);

// Paths on kernel pseudo file systems (/proc, /sys, /dev except /dev/shm): their I/O is not
// storage I/O and cannot be recreated in a sandbox, so models mark them and replay skips them.
bool IsPseudoFsPath(std::string_view normalized);

// What a file is to an I/O report: storage (regular files, directories, block devices, and
// files of unknown type) or one of the kinds that are not storage. Computed once here, from the
// file's recorded type and its normalised path, for every consumer.
enum class FileKind : uint8_t {
  kStorage = 0,
  kPipe,        // S_IFIFO
  kSocket,      // S_IFSOCK
  kCharDevice,  // S_IFCHR: ttys, /dev/null, ...
  kAnonInode,   // no file type on a capture that records types: eventfd, epoll, timerfd, ...
  kPseudoFs,    // a regular file or directory on /proc, /sys or /dev (IsPseudoFsPath)
};
inline constexpr int kFileKinds = 6;
// `ftype` is S_IFMT >> 12 as recorded (0: unknown); `normalized` the file's absolute path, or
// empty when unknown; `types_recorded`: the trace records every file's type (a live capture,
// where 0 without an absolute path means an anonymous inode; imports leave types they cannot
// see at 0).
FileKind ClassifyFile(uint16_t ftype, std::string_view normalized, bool types_recorded);
inline bool IsStorage(FileKind kind) { return kind == FileKind::kStorage; }
// "storage", "pipe", "socket", "char device", "anon inode", "pseudo fs".
std::string_view FileKindName(FileKind kind);
// The JSON key of a kind: "storage", "pipe", "socket", "char_device", "anon_inode", "pseudo_fs".
std::string_view FileKindKey(FileKind kind);

// N of a name of the caller's own descriptor N: "/proc/self/fd/N", "/proc/thread-self/fd/N" or
// "/proc/<tgid>/fd/N" (`tgid` the caller's process), as recorded; -1 for any other name.
int ProcSelfFdNumber(std::string_view path, uint32_t tgid);

// The kernel's page-cache drop knob (Documentation/admin-guide/sysctl/vm.rst, drop_caches).
inline constexpr std::string_view kDropCachesPath = "/proc/sys/vm/drop_caches";

}  // namespace iotwin::model
