#include "replay/prepare.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <optional>
#include <map>
#include <set>

#include <fmt/format.h>

#include "base/bytes_text.h"
#include "base/checked_math.h"
#include "base/fd.h"
#include "base/output_file.h"
#include "base/json_parse.h"
#include "base/page_cache.h"
#include "model/path.h"
#include "replay/fill.h"
#include "replay/sandbox.h"

namespace iotwin::replay {

namespace {

constexpr size_t kChunk = 1 << 20;
// A manifest is a list of names: far below this, whatever the file set.
constexpr off_t kManifestMaxBytes = off_t{1} << 30;

// Host directories named on the command line (the root, --map targets and their --amplify
// copies): trusted paths, created with their parents; an existing one must be a directory.
Status MkdirHost(const std::string& path, uint64_t* created) {
  if (path.empty() || path == "/") return Status::Ok();
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::Ok();
    return Status::Invalid("'{}' exists and is not a directory", path);
  }
  IOTWIN_RETURN_IF_ERROR(MkdirHost(std::string(model::ParentPath(path)), created));
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, "mkdir " + path);
  }
  if (created) (*created)++;
  return Status::Ok();
}

Status Errno(int neg_errno, std::string_view what, std::string_view path) {
  return Status::FromErrno(-neg_errno, fmt::format("{} {}", what, path));
}

// `target` and its missing parents, each created beneath its base.
Status MakeDirs(const Sandbox& sb, const std::string& target, uint64_t* created) {
  if (!sb.Contains(target)) return Status::Internal("'{}' is not under the sandbox", target);
  std::vector<std::string> missing;
  for (std::string p = target;; p = std::string(model::ParentPath(p))) {
    struct stat st;
    int rc = sb.Stat(p, true, &st);
    if (rc == 0) {
      if (!S_ISDIR(st.st_mode)) return Status::Invalid("'{}' exists and is not a directory", p);
      break;
    }
    if (rc != -ENOENT) return Errno(rc, "stat", p);
    missing.push_back(p);
    if (p == "/" || !sb.Contains(std::string(model::ParentPath(p)))) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    int rc = sb.Mkdir(*it, 0755);
    if (rc < 0 && rc != -EEXIST) return Errno(rc, "mkdir", *it);
    if (rc == 0 && created) (*created)++;
  }
  return Status::Ok();
}

// Names in the manifest are bytes, written with the project's reversible escaping
// (base/bytes_text.h), so that a later replay clears exactly the names it created.
nlohmann::json NameToJson(const std::string& name) { return BytesToText(name); }

std::optional<std::string> NameFromJson(const nlohmann::json& j) {
  if (!j.is_string()) return std::nullopt;
  return TextToBytes(j.get_ref<const std::string&>());
}

nlohmann::json FileList(const std::vector<ReplayPlan>& plans) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& plan : plans) {
    for (const auto& f : plan.initial) {
      files.push_back({{"path", NameToJson(f.recorded)}, {"target", NameToJson(f.target)},
                       {"size", f.size}, {"dir", f.dir}});
    }
  }
  return files;
}

// The user's --map targets, normalised (before any --amplify suffix).
std::vector<std::string> MapTargets(const ReplayOptions& o) {
  std::vector<std::string> out;
  for (const auto& [from, to] : o.maps) {
    std::string t = model::NormalizePath(to);
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  }
  return out;
}

// Entries of a host directory other than "." and ".."; -1 when it is missing.
int64_t CountEntries(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return -1;
  int64_t n = 0;
  while (dirent* e = readdir(d)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    n++;
  }
  closedir(d);
  return n;
}

// A --map target, like the root, must be empty or prepared by iotwin for this trace: the trace
// decides which names there are overwritten.
Status CheckMapTargets(const ReplayOptions& o, const nlohmann::json& manifest) {
  // The manifest must stay out of every name the trace can reach, --force or not.
  for (const std::string& t : MapTargets(o)) {
    if (model::PathIsWithin(ManifestPath(o.root), t)) {
      return Status::Invalid("--map target {} holds the replay's manifest {}: map to a directory "
                             "that does not contain the root's parent", t, ManifestPath(o.root));
    }
  }
  if (o.force) return Status::Ok();
  for (const std::string& t : MapTargets(o)) {
    if (model::PathIsWithin(t, o.root)) continue;  // covered by the root's own check
    if (CountEntries(t) <= 0) continue;
    bool prepared = false;
    if (manifest.is_object() && manifest.contains("bases") && manifest["bases"].is_array()) {
      for (const auto& b : manifest["bases"]) prepared |= NameFromJson(b) == t;
    }
    if (!prepared) {
      return Status::Invalid(
          "--map target {} is not empty and was not prepared by iotwin for this trace: use an "
          "empty directory, or --force to replay into it (names the trace uses there are "
          "overwritten)", t);
    }
  }
  return Status::Ok();
}

Status WriteFileContents(const Sandbox& sb, const PlannedFile& f, const ReplayOptions& o,
                         uint64_t seed, AlignedBuffer* buf, PrepareReport* r) {
  UniqueFd fd(sb.OpenFile(f.target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd.valid()) return Errno(fd.get(), "create", f.target);
  if (o.sparse || f.size == 0) {
    if (ftruncate(fd.get(), static_cast<off_t>(f.size)) != 0) {
      return Status::FromErrno(errno, "ftruncate " + f.target);
    }
    r->files_written++;
    return Status::Ok();
  }
  uint64_t off = 0, chunk_no = 0;
  while (off < f.size) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, f.size - off));
    FillPattern(buf->data(), n, o.fill, seed * 1000003 + chunk_no++);
    size_t done = 0;
    while (done < n) {
      ssize_t w = pwrite(fd.get(), buf->data() + done, n - done, static_cast<off_t>(off + done));
      if (w < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno(errno, fmt::format("write {} at {}", f.target, off + done));
      }
      done += static_cast<size_t>(w);
    }
    off += n;
    r->bytes_written += n;
  }
  if (fdatasync(fd.get()) != 0) return Status::FromErrno(errno, "fdatasync " + f.target);
  r->files_written++;
  return Status::Ok();
}

// Room on each file system for the file set (unless --sparse) and for what the replay's writes
// grow files by (capped by --max-write; none for --backend null): statvfs f_bavail, which leaves
// root's reserved blocks out, less 2% kept free.
Status CheckSpace(const std::vector<ReplayPlan>& plans, const ReplayOptions& o) {
  struct Need {
    std::string where;
    uint64_t files = 0, growth = 0, avail = 0;
  };
  std::map<unsigned long, Need> by_fs;
  auto need_at = [&](const std::string& base, Need** out) -> Status {
    struct statvfs vfs;
    if (statvfs(base.c_str(), &vfs) != 0) return Status::FromErrno(errno, "statvfs " + base);
    Need& n = by_fs[vfs.f_fsid];
    if (n.where.empty()) {
      n.where = base;
      n.avail = SaturatingMul(vfs.f_bavail, vfs.f_frsize);
    }
    *out = &n;
    return Status::Ok();
  };
  for (const auto& plan : plans) {
    for (const auto& f : plan.initial) {
      if (f.dir || o.sparse) continue;
      uint64_t want = f.size / 4096 * 4096 + (f.size % 4096 ? 4096 : 0);
      struct stat st;
      if (plan.sandbox->Stat(f.target, false, &st) == 0 && S_ISREG(st.st_mode)) {
        uint64_t have = static_cast<uint64_t>(st.st_blocks) * 512;
        want = want > have ? want - have : 0;
      }
      Need* n = nullptr;
      IOTWIN_RETURN_IF_ERROR(need_at(plan.mapper.BaseOf(f.recorded), &n));
      n->files = SaturatingAdd(n->files, want);
    }
    if (o.backend == BackendKind::kNull) continue;
    for (const auto& [base, bytes] : plan.growth_by_base) {
      Need* n = nullptr;
      IOTWIN_RETURN_IF_ERROR(need_at(base, &n));
      n->growth = SaturatingAdd(n->growth, bytes);
    }
  }
  for (const auto& [fsid, n] : by_fs) {
    const uint64_t growth = o.max_write ? std::min(n.growth, o.max_write) : n.growth;
    const uint64_t margin = n.avail / 50;  // keep 2% free
    if (SaturatingAdd(n.files, growth) > n.avail - margin) {
      return Status::Error(
          Status::Code::kIo,
          fmt::format("insufficient space on the file system of {}: the file set needs {} bytes "
                      "and the replay's writes grow files by up to {} bytes{}, {} available "
                      "(root's reserve excluded, 2% kept free); use --sparse to skip the file "
                      "set's data blocks, --max-write to bound the writes, or a larger target",
                      n.where, n.files, growth, growth < n.growth ? " (--max-write)" : "",
                      n.avail));
    }
  }
  return Status::Ok();
}

// Names a previous replay created, as our manifest lists them, deepest first; each removed
// beneath its base, never recursively, never a base itself.
void ClearCreated(const std::vector<ReplayPlan>& plans, const nlohmann::json& manifest,
                  PrepareReport* r) {
  if (!manifest.contains("created") || !manifest["created"].is_array()) return;
  for (const auto& c : manifest["created"]) {
    std::optional<std::string> name = NameFromJson(c);
    if (!name) continue;
    for (const auto& plan : plans) {
      const Sandbox& sb = *plan.sandbox;
      if (!sb.Contains(*name)) continue;
      const auto& bases = plan.mapper.Bases();
      if (std::find(bases.begin(), bases.end(), *name) != bases.end()) continue;
      int kind = sb.Kind(*name);
      if (kind < 0) continue;
      if (sb.Unlink(*name, kind == S_IFDIR ? AT_REMOVEDIR : 0) == 0) r->names_cleared++;
      break;
    }
  }
}

// The initial directories and files, with their fill.
Status CreateInitialSet(const std::vector<ReplayPlan>& plans, const ReplayOptions& o,
                        PrepareReport* r) {
  AlignedBuffer buf(kChunk);
  if (!buf.data()) return Status::Io("cannot allocate a {}-byte fill buffer", kChunk);
  uint64_t seed = 1;
  for (const auto& plan : plans) {
    const Sandbox& sb = *plan.sandbox;
    for (const auto& f : plan.initial) {
      seed++;
      int kind = sb.Kind(f.target);
      bool exists = kind >= 0;
      if (f.dir) {
        if (exists && kind != S_IFDIR) {
          if (!r->manifest_found) {
            r->notes.push_back(fmt::format(
                "'{}' ({}) exists and is not a directory, but the trace uses it as one: left as "
                "it is, so calls on it may differ", f.recorded, f.target));
            continue;
          }
          if (int rc = sb.Unlink(f.target, 0); rc < 0) return Errno(rc, "unlink", f.target);
        }
        IOTWIN_RETURN_IF_ERROR(MakeDirs(sb, f.target, &r->dirs_created));
        continue;
      }
      std::string parent(model::ParentPath(f.target));
      if (sb.Contains(parent)) IOTWIN_RETURN_IF_ERROR(MakeDirs(sb, parent, &r->dirs_created));
      if (exists) {
        struct stat st;
        if (kind == S_IFLNK || kind == S_IFDIR) {
          if (!r->manifest_found || plan.mapper.BaseOf(f.recorded) == f.target) {
            r->notes.push_back(fmt::format(
                "'{}' ({}) exists and is not a regular file, but the trace uses it as one: left "
                "as it is, so calls on it may differ", f.recorded, f.target));
            continue;
          }
          int rc = sb.Unlink(f.target, kind == S_IFDIR ? AT_REMOVEDIR : 0);
          if (rc < 0) return Errno(rc, "remove", f.target);
        } else if (kind == S_IFREG && sb.Stat(f.target, false, &st) == 0 &&
                   static_cast<uint64_t>(st.st_size) == f.size &&
                   (o.sparse || static_cast<uint64_t>(st.st_blocks) * 512 + 4096 >= f.size)) {
          r->files_reused++;
          continue;
        }
      }
      IOTWIN_RETURN_IF_ERROR(WriteFileContents(sb, f, o, seed, &buf, r));
    }
  }
  return Status::Ok();
}

// The manifest, beside the root (ManifestPath), written through an OutputFile: a private
// temporary renamed over the name, never through a symlink someone else planted.
Status WriteManifest(const std::vector<ReplayPlan>& plans, const ReplayOptions& o) {
  nlohmann::json created = nlohmann::json::array();
  for (const auto& plan : plans) {
    for (const auto& c : plan.created) created.push_back(NameToJson(c));
  }
  nlohmann::json bases = nlohmann::json::array({NameToJson(o.root)});
  for (const std::string& t : MapTargets(o)) bases.push_back(NameToJson(t));
  nlohmann::json out = {{"iotwin_manifest", 1},
                        {"source", NameToJson(o.trace)},
                        {"fill", o.fill.ToString()},
                        {"sparse", o.sparse},
                        {"amplify", o.amplify},
                        {"root", NameToJson(o.root)},
                        {"bases", bases},
                        {"files", FileList(plans)},
                        {"created", created}};
  IOTWIN_ASSIGN_OR_RETURN(OutputFile file, OutputFile::Create(ManifestPath(o.root)));
  IOTWIN_RETURN_IF_ERROR(file.Write(out.dump(1) + "\n"));
  return file.Commit();
}

// The manifest's text, read without following a symlink and with a bounded size.
Result<std::string> ReadManifest(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno(errno, "open " + path);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, "stat " + path);
  if (!S_ISREG(st.st_mode) || st.st_size > kManifestMaxBytes) {
    return Status::Corrupt("{}: not a regular file of at most {} bytes", path, kManifestMaxBytes);
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = read(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

}  // namespace

nlohmann::json PrepareReport::ToJson() const {
  return {{"manifest_found", manifest_found}, {"dirs_created", dirs_created},
          {"files_written", files_written},   {"files_reused", files_reused},
          {"bytes_written", bytes_written},   {"names_cleared", names_cleared},
          {"cache_files_warmed", cache_files_warmed},
          {"cache_files_dropped", cache_files_dropped},
          {"cache_pages_left_resident", cache_pages_left_resident},
          {"cache_files_measured", cache_files_measured},
          {"cache_files_by_extents", cache_files_by_extents},
          {"cache_pages_target", cache_pages_target},
          {"cache_pages_resident", cache_pages_resident}, {"notes", notes}};
}

std::string ManifestPath(const std::string& root) {
  const size_t slash = root.rfind('/');
  if (slash == std::string::npos) return "." + root + kManifestSuffix;
  return root.substr(0, slash + 1) + "." + root.substr(slash + 1) + kManifestSuffix;
}

Result<std::string> CanonicalRoot(const std::string& root) {
  if (root.empty()) return Status::Invalid("--root is required");
  std::string abs = root;
  if (abs[0] != '/') {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return Status::FromErrno(errno, "getcwd");
    abs = std::string(cwd) + "/" + root;
  }
  abs = model::NormalizePath(abs);
  if (abs == "/") return Status::Invalid("--root cannot be '/'");
  IOTWIN_RETURN_IF_ERROR(MkdirHost(abs, nullptr));
  char real[PATH_MAX];
  if (!realpath(abs.c_str(), real)) return Status::FromErrno(errno, "realpath " + abs);
  if (std::string(real) == "/") return Status::Invalid("--root cannot be '/'");
  return std::string(real);
}

Result<nlohmann::json> CheckRoot(const std::string& root, const ReplayOptions& o) {
  DIR* d = opendir(root.c_str());
  if (!d) return Status::FromErrno(errno, "opendir " + root);
  bool other = false;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    other = true;
    break;
  }
  closedir(d);
  nlohmann::json m;
  const std::string path = ManifestPath(root);
  struct stat manifest_st;
  if (lstat(path.c_str(), &manifest_st) == 0) {
    Result<std::string> text = ReadManifest(path);
    Result<nlohmann::json> parsed = text.ok() ? ParseUntrustedJson(*text) : text.status();
    m = parsed.ok() ? *parsed : nlohmann::json(nlohmann::json::value_t::discarded);
    if (m.is_discarded()) {
      if (!o.force) {
        return Status::Corrupt("{}: unreadable manifest ({}); use --force to overwrite it", path,
                               parsed.status().message());
      }
      m = nullptr;
    }
    if (!m.is_null() && (!m.is_object() || !m.contains("iotwin_manifest") ||
                         m["iotwin_manifest"] != 1)) {
      if (!o.force) {
        return Status::Corrupt("{}: not an iotwin manifest; use --force to overwrite it", path);
      }
      m = nullptr;
    }
  }
  if (other && m.is_null() && !o.force) {
    return Status::Invalid(
        "replay root {} is not empty and has no iotwin manifest ({}): use an empty directory, "
        "one prepared by 'iotwin replay --prepare-only', or --force", root, path);
  }
  return m;
}

Result<PrepareReport> PrepareSandbox(std::vector<ReplayPlan>& plans, const ReplayOptions& o) {
  PrepareReport r;
  IOTWIN_ASSIGN_OR_RETURN(nlohmann::json manifest, CheckRoot(o.root, o));
  r.manifest_found = !manifest.is_null();
  if (r.manifest_found) {
    bool same = manifest.contains("files") && manifest["files"] == FileList(plans);
    if (!same && !o.force) {
      std::optional<std::string> source =
          manifest.contains("source") ? NameFromJson(manifest["source"]) : std::nullopt;
      return Status::Invalid(
          "{} describes the file set of another trace ({}); use another root, or --force to "
          "rebuild it", ManifestPath(o.root), source.value_or("?"));
    }
  }
  IOTWIN_RETURN_IF_ERROR(CheckMapTargets(o, manifest));
  for (auto& plan : plans) {
    for (const auto& b : plan.mapper.Bases()) IOTWIN_RETURN_IF_ERROR(MkdirHost(b, &r.dirs_created));
    IOTWIN_ASSIGN_OR_RETURN(plan.sandbox, Sandbox::Open(plan.mapper));
    // Where confined workers see each --map target (Sandbox::ConfineThread).
    for (const auto& [from, to] : plan.mapper.maps()) {
      std::string point = Sandbox::MountPoint(plan.mapper, from);
      if (plan.sandbox->Contains(point)) {
        IOTWIN_RETURN_IF_ERROR(MakeDirs(*plan.sandbox, point, &r.dirs_created));
      }
    }
  }
  if (r.manifest_found) ClearCreated(plans, manifest, &r);
  // Symlinks already present must not lead outside: refused here, with a clear message, before
  // anything is written (every later call would fail on them with EXDEV anyway).
  for (const auto& plan : plans) {
    std::set<std::string> seen;
    for (const auto& t : plan.targets) {
      if (t.empty() || !seen.insert(t).second) continue;
      IOTWIN_RETURN_IF_ERROR(plan.mapper.CheckBeneath(t));
    }
  }
  IOTWIN_RETURN_IF_ERROR(CheckSpace(plans, o));
  IOTWIN_RETURN_IF_ERROR(CreateInitialSet(plans, o, &r));
  IOTWIN_RETURN_IF_ERROR(ApplyCacheState(plans, o.cache, &r));
  IOTWIN_RETURN_IF_ERROR(WriteManifest(plans, o));
  return r;
}

namespace {

// The byte ranges of a file to warm for --cache as-captured: the captured count of pages, with
// the pages the workload found resident among them when the trace says which
// (CacheState::resident_extents; model::PagesToWarm fills the rest around them, then from the
// start); otherwise from the file's start. Numbers from the trace are multiplied saturating.
std::vector<std::pair<uint64_t, uint64_t>> CapturedWarmRanges(const model::CacheState& cs,
                                                              uint64_t* by_extents) {
  constexpr uint64_t kPage = 4096;  // CACHE_STATE counts pages of the traced machine: 4 KiB
  std::vector<std::pair<uint64_t, uint64_t>> warm;
  if (cs.resident_pages == 0) return warm;
  std::vector<model::PageExtent> known, absent;
  if (cs.extents_known && cs.resident_pages < cs.total_pages) {
    (*by_extents)++;
    known = cs.resident_extents;
    absent = cs.absent_extents;
  }
  for (const auto& x : model::PagesToWarm(known, absent, cs.resident_pages, cs.total_pages)) {
    warm.push_back({SaturatingMul(x.first, kPage),
                    SaturatingMul(SaturatingAdd(x.first, x.pages), kPage)});
  }
  return warm;
}

// Reads [begin, end) of `fd` through the page cache; returns the bytes read.
uint64_t ReadThrough(int fd, uint64_t begin, uint64_t end, AlignedBuffer* buf) {
  uint64_t off = begin;
  while (off < end && buf->data()) {
    ssize_t n = pread(fd, buf->data(), std::min<uint64_t>(kChunk, end - off),
                      static_cast<off_t>(off));
    if (n <= 0) break;
    off += static_cast<uint64_t>(n);
  }
  return off - begin;
}

// One prepared file brought to the residency asked of it, then measured: the report says what
// the page cache holds, not what was asked of it. `warm` lists the byte ranges to warm (empty:
// none).
void ApplyFileCacheState(int fd, const std::string& target, uint64_t size,
                         const std::vector<std::pair<uint64_t, uint64_t>>& warm,
                         AlignedBuffer* buf, PrepareReport* r) {
  // Write-back first: DONTNEED leaves dirty pages and pages under write-back resident, and
  // the preparation has just written these files, so without it a "cold" file stays warm.
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  // Only the ranges asked for: no readahead beyond them (this descriptor's own setting).
  posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t target_pages = 0;
  for (const auto& [begin, end] : warm) {
    const uint64_t b = std::min(begin, size), e = std::min(end, size);
    if (b >= e) continue;
    target_pages += (e + page - 1) / page - b / page;
    ReadThrough(fd, b, e, buf);
  }
  if (target_pages == 0) r->cache_files_dropped++;
  else r->cache_files_warmed++;
  r->cache_pages_target += target_pages;
  auto residency = MeasureResidency(fd);
  if (!residency.ok()) {
    r->notes.push_back(fmt::format("{}: page-cache residency after preparation not measured: {}",
                                   target, residency.status().message()));
    return;
  }
  r->cache_files_measured++;
  const uint64_t resident = residency->resident_pages;
  r->cache_pages_resident += resident;
  if (target_pages == 0 && resident > 0) {
    r->cache_pages_left_resident += resident;
    r->notes.push_back(fmt::format("{}: {} pages still in the page cache after the drop", target,
                                   resident));
  } else if (target_pages > 0 && resident < target_pages) {
    r->notes.push_back(fmt::format("{}: {} of the {} pages to warm are in the page cache", target,
                                   resident, target_pages));
  }
}

}  // namespace

Status ApplyCacheState(const std::vector<ReplayPlan>& plans, CacheMode mode, PrepareReport* r) {
  // Whatever the mode, nothing prepared may still be dirty when the replay starts.
  for (const auto& plan : plans) {
    for (const auto& b : plan.mapper.Bases()) {
      UniqueFd d(open(b.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (d.valid()) syncfs(d.get());
    }
  }
  CacheMode effective = mode;
  // By the model's file (linked through the inode: the record names /usr/lib/... where the
  // workload opened /lib/...); plans share one model.
  std::map<uint32_t, const model::CacheState*> states;
  if (mode == CacheMode::kAsCaptured && !plans.empty()) {
    for (const auto& cs : plans[0].model->cache_states()) {
      if (cs.file != model::kNone) states.emplace(cs.file, &cs);
    }
    if (states.empty()) {
      r->notes.push_back("the trace holds no initial page-cache state: starting cold");
      effective = CacheMode::kCold;
    }
  }
  AlignedBuffer buf(kChunk);
  for (const auto& plan : plans) {
    for (const auto& f : plan.initial) {
      if (f.dir) continue;
      if (!plan.sandbox) continue;
      UniqueFd fd(plan.sandbox->OpenFile(f.target, O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0));
      if (!fd.valid()) continue;
      std::vector<std::pair<uint64_t, uint64_t>> warm;
      if (effective == CacheMode::kWarm) {
        warm.push_back({0, f.size});
      } else if (effective == CacheMode::kAsCaptured) {
        auto it = states.find(f.file);
        if (it != states.end()) warm = CapturedWarmRanges(*it->second, &r->cache_files_by_extents);
      }
      ApplyFileCacheState(fd.get(), f.target, f.size, warm, &buf, r);
    }
  }
  return Status::Ok();
}

}  // namespace iotwin::replay
