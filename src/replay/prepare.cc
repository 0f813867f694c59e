#include "replay/prepare.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "base/fd.h"
#include "base/page_cache.h"
#include "model/path.h"
#include "replay/fill.h"

namespace iotwin::replay {

namespace {

constexpr size_t kChunk = 1 << 20;

Status MkdirP(const std::string& path, uint64_t* created) {
  if (path.empty() || path == "/") return Status::Ok();
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::Ok();
    return Status::Invalid("'{}' exists and is not a directory", path);
  }
  IOTWIN_RETURN_IF_ERROR(MkdirP(std::string(model::ParentPath(path)), created));
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, "mkdir " + path);
  }
  if (created) (*created)++;
  return Status::Ok();
}

// Nearest existing ancestor (for statvfs of a path that does not exist yet).
std::string ExistingAncestor(std::string p) {
  struct stat st;
  while (!p.empty() && p != "/" && stat(p.c_str(), &st) != 0) p = std::string(model::ParentPath(p));
  return p.empty() ? "/" : p;
}

nlohmann::json FileList(const std::vector<ReplayPlan>& plans) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& plan : plans) {
    for (const auto& f : plan.initial) {
      files.push_back({{"path", f.recorded}, {"target", f.target}, {"size", f.size}, {"dir", f.dir}});
    }
  }
  return files;
}

Status WriteFileContents(const PlannedFile& f, const ReplayOptions& o, uint64_t seed,
                         AlignedBuffer* buf, PrepareReport* r) {
  UniqueFd fd(open(f.target.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd.valid()) return Status::FromErrno(errno, "create " + f.target);
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

Status CheckSpace(const std::vector<ReplayPlan>& plans, const ReplayOptions& o) {
  if (o.sparse) return Status::Ok();
  struct Need {
    std::string where;
    uint64_t bytes = 0;
    uint64_t avail = 0;
  };
  std::map<unsigned long, Need> by_fs;
  for (const auto& plan : plans) {
    for (const auto& f : plan.initial) {
      if (f.dir) continue;
      uint64_t want = (f.size + 4095) / 4096 * 4096;
      struct stat st;
      if (lstat(f.target.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
        uint64_t have = static_cast<uint64_t>(st.st_blocks) * 512;
        want = want > have ? want - have : 0;
      }
      std::string anc = ExistingAncestor(f.target);
      struct statvfs vfs;
      if (statvfs(anc.c_str(), &vfs) != 0) return Status::FromErrno(errno, "statvfs " + anc);
      Need& n = by_fs[vfs.f_fsid];
      if (n.where.empty()) {
        n.where = anc;
        n.avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
      }
      n.bytes += want;
    }
  }
  for (const auto& [fsid, n] : by_fs) {
    uint64_t margin = n.avail / 50;  // keep 2% free
    if (n.bytes + margin > n.avail) {
      return Status::Error(Status::Code::kIo,
                           fmt::format("insufficient space on the file system of {}: the file set "
                                       "needs {} bytes, {} available (use --sparse to skip data "
                                       "blocks, or a larger target)",
                                       n.where, n.bytes, n.avail));
    }
  }
  return Status::Ok();
}

}  // namespace

nlohmann::json PrepareReport::ToJson() const {
  return {{"manifest_found", manifest_found}, {"dirs_created", dirs_created},
          {"files_written", files_written},   {"files_reused", files_reused},
          {"bytes_written", bytes_written},   {"names_cleared", names_cleared},
          {"cache_files_warmed", cache_files_warmed},
          {"cache_files_dropped", cache_files_dropped},
          {"cache_pages_left_resident", cache_pages_left_resident}, {"notes", notes}};
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
  IOTWIN_RETURN_IF_ERROR(MkdirP(abs, nullptr));
  char real[PATH_MAX];
  if (!realpath(abs.c_str(), real)) return Status::FromErrno(errno, "realpath " + abs);
  if (std::string(real) == "/") return Status::Invalid("--root cannot be '/'");
  return std::string(real);
}

Result<nlohmann::json> CheckRoot(const std::string& root, const ReplayOptions& o) {
  DIR* d = opendir(root.c_str());
  if (!d) return Status::FromErrno(errno, "opendir " + root);
  bool other = false, manifest = false;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    if (n == kManifestName) manifest = true;
    else other = true;
  }
  closedir(d);
  nlohmann::json m;
  if (manifest) {
    std::ifstream in(root + "/" + kManifestName);
    try {
      in >> m;
    } catch (const std::exception& e) {
      if (!o.force) {
        return Status::Corrupt("{}/{}: unreadable manifest ({}); use --force to overwrite it", root,
                               kManifestName, e.what());
      }
      m = nullptr;
    }
    if (!m.is_null() && (!m.is_object() || m.value("iotwin_manifest", 0) != 1)) {
      if (!o.force) {
        return Status::Corrupt("{}/{}: not an iotwin manifest; use --force to overwrite it", root,
                               kManifestName);
      }
      m = nullptr;
    }
  }
  if (other && m.is_null() && !o.force) {
    return Status::Invalid(
        "replay root {} is not empty and holds no iotwin manifest: use an empty directory, one "
        "prepared by 'iotwin replay --prepare-only', or --force", root);
  }
  return m;
}

Result<PrepareReport> PrepareSandbox(const std::vector<ReplayPlan>& plans, const ReplayOptions& o) {
  PrepareReport r;
  IOTWIN_ASSIGN_OR_RETURN(nlohmann::json manifest, CheckRoot(o.root, o));
  nlohmann::json files = FileList(plans);
  r.manifest_found = !manifest.is_null();
  if (r.manifest_found) {
    bool same = manifest.contains("files") && manifest["files"] == files;
    if (!same && !o.force) {
      return Status::Invalid(
          "{}/{} describes the file set of another trace ({}); use another root, or --force to "
          "rebuild it", o.root, kManifestName, manifest.value("source", std::string("?")));
    }
    // Names a previous replay created: only those our manifest lists, deepest first.
    if (manifest.contains("created") && manifest["created"].is_array()) {
      std::vector<std::string> names;
      for (const auto& c : manifest["created"]) {
        if (c.is_string()) names.push_back(c.get<std::string>());
      }
      for (const auto& n : names) {
        bool inside = false;
        for (const auto& plan : plans) {
          for (const auto& b : plan.mapper.Bases()) inside |= model::PathIsWithin(n, b) && n != b;
        }
        if (!inside) continue;  // never outside the sandbox, whatever the file says
        struct stat st;
        if (lstat(n.c_str(), &st) != 0) continue;
        int rc = S_ISDIR(st.st_mode) ? rmdir(n.c_str()) : unlink(n.c_str());
        if (rc == 0) r.names_cleared++;
      }
    }
  }
  // Symlinks already present must not lead outside.
  for (const auto& plan : plans) {
    std::set<std::string> seen;
    for (const auto& t : plan.targets) {
      if (t.empty() || !seen.insert(t).second) continue;
      IOTWIN_RETURN_IF_ERROR(plan.mapper.CheckBeneath(t));
    }
  }
  IOTWIN_RETURN_IF_ERROR(CheckSpace(plans, o));

  AlignedBuffer buf(kChunk);
  if (!buf.data()) return Status::Io("cannot allocate a {}-byte fill buffer", kChunk);
  uint64_t seed = 1;
  for (const auto& plan : plans) {
    for (const auto& b : plan.mapper.Bases()) IOTWIN_RETURN_IF_ERROR(MkdirP(b, &r.dirs_created));
    for (const auto& f : plan.initial) {
      seed++;
      struct stat st;
      bool exists = lstat(f.target.c_str(), &st) == 0;
      if (f.dir) {
        if (exists && !S_ISDIR(st.st_mode)) {
          if (!r.manifest_found) {
            return Status::Invalid("'{}' exists and is not a directory", f.target);
          }
          if (unlink(f.target.c_str()) != 0) return Status::FromErrno(errno, "unlink " + f.target);
        }
        IOTWIN_RETURN_IF_ERROR(MkdirP(f.target, &r.dirs_created));
        continue;
      }
      IOTWIN_RETURN_IF_ERROR(MkdirP(std::string(model::ParentPath(f.target)), &r.dirs_created));
      if (exists) {
        if (S_ISLNK(st.st_mode) || S_ISDIR(st.st_mode)) {
          if (!r.manifest_found) {
            return Status::Invalid("'{}' exists and is not a regular file", f.target);
          }
          int rc = S_ISDIR(st.st_mode) ? rmdir(f.target.c_str()) : unlink(f.target.c_str());
          if (rc != 0) return Status::FromErrno(errno, "remove " + f.target);
        } else if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) == f.size &&
                   (o.sparse || static_cast<uint64_t>(st.st_blocks) * 512 + 4096 >= f.size)) {
          r.files_reused++;
          continue;
        }
      }
      IOTWIN_RETURN_IF_ERROR(WriteFileContents(f, o, seed, &buf, &r));
    }
  }
  IOTWIN_RETURN_IF_ERROR(ApplyCacheState(plans, o.cache, &r));

  nlohmann::json created = nlohmann::json::array();
  for (const auto& plan : plans) {
    for (const auto& c : plan.created) created.push_back(c);
  }
  nlohmann::json out = {{"iotwin_manifest", 1},
                        {"source", o.trace},
                        {"fill", o.fill.ToString()},
                        {"sparse", o.sparse},
                        {"amplify", o.amplify},
                        {"root", o.root},
                        {"files", files},
                        {"created", created}};
  std::string path = o.root + "/" + kManifestName, tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << out.dump(1) << "\n";
    if (!f) return Status::Io("cannot write {}", tmp);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) return Status::FromErrno(errno, "rename " + path);
  return r;
}

Status ApplyCacheState(const std::vector<ReplayPlan>& plans, CacheMode mode, PrepareReport* r) {
  // Whatever the mode, nothing prepared may still be dirty when the replay starts.
  for (const auto& plan : plans) {
    for (const auto& b : plan.mapper.Bases()) {
      UniqueFd d(open(b.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (d.valid()) syncfs(d.get());
    }
  }
  CacheMode effective = mode;
  std::map<std::string, const model::CacheState*> states;
  if (mode == CacheMode::kAsCaptured) {
    for (const auto& plan : plans) {
      for (const auto& cs : plan.model->cache_states()) {
        if (cs.path != model::kNone) states[plan.model->path(cs.path)] = &cs;
      }
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
      UniqueFd fd(open(f.target.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
      if (!fd.valid()) continue;
      uint64_t warm_bytes = 0;
      if (effective == CacheMode::kWarm) {
        warm_bytes = f.size;
      } else if (effective == CacheMode::kAsCaptured) {
        auto it = states.find(f.recorded);
        if (it != states.end()) warm_bytes = it->second->resident_pages * 4096;
      }
      // Write-back first: DONTNEED leaves dirty pages and pages under write-back resident, and
      // the preparation has just written these files, so without it a "cold" file stays warm.
      fdatasync(fd.get());
      posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
      if (warm_bytes == 0) {
        r->cache_files_dropped++;
        auto residency = MeasureResidency(fd.get());
        if (!residency.ok()) {
          r->notes.push_back(fmt::format("{}: page-cache residency after the drop not measured: {}",
                                         f.target, residency.status().message()));
          continue;
        }
        const uint64_t resident = residency->resident_pages;
        if (resident > 0) {
          r->cache_pages_left_resident += resident;
          r->notes.push_back(fmt::format("{}: {} pages still in the page cache after the drop",
                                         f.target, resident));
        }
        continue;
      }
      uint64_t off = 0;
      while (off < warm_bytes && buf.data()) {
        ssize_t n = pread(fd.get(), buf.data(), std::min<uint64_t>(kChunk, warm_bytes - off),
                          static_cast<off_t>(off));
        if (n <= 0) break;
        off += static_cast<uint64_t>(n);
      }
      r->cache_files_warmed++;
    }
  }
  return Status::Ok();
}

}  // namespace iotwin::replay
