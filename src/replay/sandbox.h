// Sandbox: every file operation of prepare, clear and replay, resolved by the kernel beneath the
// base directory it maps into (the root or a --map target), whatever the trace says and whatever
// symlinks exist there.
//
// A trace is untrusted input and the replay runs as root. Lexical normalisation of recorded paths
// (model::NormalizePath) is not enough on its own: a symlink the workload created, or one planted
// in the sandbox between two replays, is resolved by the kernel, not by us. So each base is held
// open as an O_PATH descriptor, and every path is resolved from it with openat2(2)
// RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS (Linux 5.6, commit fddb5d430ad9 "open: introduce
// openat2(2) syscall"): a component that would leave the base, an absolute symlink or a /proc
// magic link fails with EXDEV or ELOOP instead of being followed. Calls that have no resolve
// flags of their own (mkdirat, unlinkat, renameat2, linkat, symlinkat, fstatat, statx) get the
// parent directory resolved that way and act on the final name only, or act on an O_PATH
// descriptor of the resolved object (AT_EMPTY_PATH). A name holding a NUL byte is refused with
// EINVAL: the kernel would see only the part before it.
//
// Workers do better than that: each confines itself before the replay starts (ConfineThread): a
// root directory of its own (unshare(CLONE_FS) + chroot to the base; --map targets bound at their
// recorded prefixes in a mount namespace of its own), so the kernel resolves every absolute path,
// "..", and symlink within the base, and the worker issues each call as recorded (open stays
// open, stat stays stat, on the recorded path). Where that is not possible (nested --map
// prefixes, no CAP_SYS_ADMIN/CAP_SYS_CHROOT) its calls go through this class instead, at the
// price of one more call per path and, for some calls, another system call than recorded.
//
// Symlinks the replay creates point to relative targets computed from the real location of the
// link's directory inside the same base, the directory the kernel puts the link in (which differs
// from the recorded one when a directory on the way is itself a symlink), never from the
// recorded path. Such a text climbs at most to the base (its ".." components lead from the real
// directory up to the deepest directory it shares with the target, and both lie in the base), so
// the link resolves under RESOLVE_BENEATH, in a confined worker's root, and for a program walking
// the sandbox without either. A target in another base (a symlink from the root into a --map
// target) is written as the mapped absolute path; RESOLVE_BENEATH refuses to follow it (EXDEV),
// which the replay counts as a result mismatch. Confined workers see each --map target bound at
// its recorded prefix inside the root: a link from the root into one keeps its relative text
// (on the host it leads to the empty directory of the prefix, still inside the root); a link
// from a --map target elsewhere gets the mapped absolute path, which a confined worker does not
// find (a mismatch as well).
//
// Every method returns what the system call would (>= 0, or -errno) and is safe to call from
// several threads at once.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "base/status.h"
#include "replay/path_mapper.h"

struct statx;

namespace iotwin::replay {

class Sandbox {
 public:
  // Opens every base of `mapper` (they must exist and be directories, not symlinks). Fails on a
  // kernel without openat2: without it the sandbox cannot be enforced, and iotwin does not replay
  // an untrusted trace on lexical checks alone.
  static Result<std::shared_ptr<const Sandbox>> Open(const PathMapper& mapper);

  // Confines the calling thread to `mapper`'s root (see above). Irreversible for the thread;
  // the replay's workers call it before their first op. Fails without changing anything the
  // replay relies on when the kernel or the privileges do not allow it.
  static Status ConfineThread(const PathMapper& mapper);
  // Where --map prefix `recorded_prefix` is bound inside the root (created by preparation).
  static std::string MountPoint(const PathMapper& mapper, std::string_view recorded_prefix);

  // open/openat/openat2/creat: `target` is a mapped absolute path. `resolve` adds the recorded
  // RESOLVE_* flags (RESOLVE_BENEATH/IN_ROOT of the original are subsumed).
  int OpenFile(std::string_view target, uint64_t flags, uint64_t mode, uint64_t resolve = 0) const;
  // An O_PATH descriptor of `target`, following a final symlink when `follow`.
  int OpenPath(std::string_view target, bool follow) const;

  int Stat(std::string_view target, bool follow, struct stat* st) const;
  // statx with the recorded flags (AT_SYMLINK_NOFOLLOW, AT_STATX_*) and mask.
  int Statx(std::string_view target, int flags, unsigned mask, struct statx* stx) const;
  int Mkdir(std::string_view target, mode_t mode) const;
  // The socket file an AF_UNIX bind to `target` makes (mknodat S_IFSOCK; the umask applies, as
  // to bind's); EADDRINUSE where the name exists, as bind answers.
  int MakeSocketFile(std::string_view target, mode_t mode) const;
  // unlink, or rmdir with AT_REMOVEDIR.
  int Unlink(std::string_view target, int flags) const;
  int Rename(std::string_view from, std::string_view to, unsigned flags) const;
  int Link(std::string_view from, std::string_view to, bool follow) const;
  // linkat(fd, "", ..., AT_EMPTY_PATH): a new name `to` for the open file `fd` (an O_TMPFILE
  // file, mostly). `through_proc`: as linkat(AT_FDCWD, "/proc/self/fd/<fd>", ...,
  // AT_SYMLINK_FOLLOW), the form the workload used (no CAP_DAC_READ_SEARCH needed).
  int LinkDescriptor(int fd, std::string_view to, bool through_proc = false) const;
  // Creates a symlink at `link` pointing to `points_to` (both mapped absolute paths).
  int Symlink(std::string_view points_to, std::string_view link) const;
  // The same from a worker confined by ConfineThread: `points_to` and `link` are absolute paths
  // in its root (recorded, normalised). The calling thread's working directory (its own,
  // CLONE_FS) moves to the link's directory for the call and back: /proc is not mounted in its
  // root, so getcwd says where that directory is, and the link is made there by its final name,
  // with symlinkat on the directory when `at`, else with symlink(2) as recorded.
  int SymlinkInRoot(std::string_view points_to, std::string_view link, bool at) const;
  // After a rename, exchange or link gave something the name `name` (a mapped path, or with
  // `in_root` a path in the calling confined worker's root): a symlink there, or beneath it when
  // it is a directory, may now lie less deep below its base than its text's leading ".." climb.
  // Such a text loses the ".." that would climb above the base (a confined worker's kernel stops
  // there anyway), so that the link still resolves inside for a walker on the host. Nothing is
  // walked until the replay has made a link whose text climbs.
  void ClampMovedLinks(std::string_view name, bool in_root) const;
  // Whether a rename, exchange or link may still be made: the walks above visit at most about
  // kMaxClampWalk entries in a replay (a trace renaming a large tree back and forth would make
  // them quadratic); past that such calls fail with ELOOP, and count as mismatches.
  static constexpr uint64_t kMaxClampWalk = 10'000'000;
  bool MayGiveNewNames() const;
  int Truncate(std::string_view target, int64_t length) const;
  int Chdir(std::string_view target) const;
  // The kind of `target` without following a final symlink: S_IFREG, S_IFDIR, ... or -errno.
  int Kind(std::string_view target) const;

  // Whether `target` lies in one of the bases (checked before anything is resolved).
  bool Contains(std::string_view target) const;

 private:
  struct Base {
    std::string path;  // as mapped (the prefix of every target under it)
    std::string real;  // where the kernel has it (for relative symlink targets)
    UniqueFd fd;       // O_PATH | O_DIRECTORY
  };
  // The base `target` lies under, with the path below it ("" for the base itself).
  const Base* Locate(std::string_view target, std::string* rel) const;
  // The directory holding `target`, resolved beneath its base, and the final name. `dir` is
  // owned (closed by the caller's UniqueFd) unless it is the base's own descriptor.
  struct Parent {
    const Base* base = nullptr;
    int fd = -1;
    UniqueFd owned;
    std::string name;
  };
  int OpenParent(std::string_view target, Parent* out) const;
  // The text of a link in directory `dir` to `points_to`, both paths in a confined root.
  std::string InRootLinkText(std::string_view dir, std::string_view points_to) const;

  // Notes a link this replay made, with its text.
  void NoteLink(std::string_view text) const;

  std::vector<Base> bases_;  // longest path first
  mutable std::atomic<bool> climbing_links_{false};  // a link whose text starts with ".."
  mutable std::atomic<uint64_t> walked_{0};          // entries ClampMovedLinks visited
  PathMapper mapper_;        // for paths in a confined worker's root (--map prefixes bound there)
};

}  // namespace iotwin::replay
