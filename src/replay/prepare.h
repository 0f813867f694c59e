// Preparing the sandbox: the initial file set on disk, the initial page-cache state, and the
// manifest (PARENT/.ROOT.iotwin-manifest.json, beside the root ROOT) that lets a later replay
// verify and reuse the set. The manifest lies outside the root, where no name a trace uses can
// reach it (a worker's root is the replay root); the root's parent is the user's, named on the
// command line.
//
// Safety rules: a root, or a --map target, that holds anything but what iotwin prepared is refused
// (unless --force); free space is checked before anything is written; only names listed in our
// own manifest are ever deleted (the names a previous replay created), never recursively; every
// file operation under a base is resolved beneath it by the kernel (sandbox.h), and existing
// symlinks that would lead out are refused up front (PathMapper::CheckBeneath). A name the trace
// uses as a file where a directory exists (or the reverse) is left alone with a warning.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "replay/options.h"
#include "replay/plan.h"

namespace iotwin::replay {

inline constexpr const char* kManifestSuffix = ".iotwin-manifest.json";

// The manifest of canonical root `root`: PARENT/.NAME.iotwin-manifest.json for PARENT/NAME.
std::string ManifestPath(const std::string& root);

struct PrepareReport {
  bool manifest_found = false;
  uint64_t dirs_created = 0;
  uint64_t files_written = 0;
  uint64_t files_reused = 0;
  uint64_t bytes_written = 0;
  uint64_t names_cleared = 0;
  uint64_t cache_files_warmed = 0;
  uint64_t cache_files_dropped = 0;
  uint64_t cache_pages_left_resident = 0;  // of dropped files, found by mincore after the drop
  // Measured after preparation (cachestat, or mincore), over every prepared file: the pages the
  // cache mode asked to be resident, and those that are.
  uint64_t cache_files_measured = 0;
  // as-captured files warmed page by page from the trace's evidence (CacheState extents), not
  // from the start by the captured count
  uint64_t cache_files_by_extents = 0;
  uint64_t cache_pages_target = 0;
  uint64_t cache_pages_resident = 0;
  std::vector<std::string> notes;
  nlohmann::json ToJson() const;
};

// Makes `root` an existing directory and returns its canonical path.
Result<std::string> CanonicalRoot(const std::string& root);

// Refuses a root that is not empty and holds no manifest (unless options.force); returns the
// manifest when there is one (null JSON otherwise).
Result<nlohmann::json> CheckRoot(const std::string& root, const ReplayOptions& options);

// Prepares the file set of every plan (one per --amplify copy) under options.root: clears names
// a previous replay created, checks space and symlinks, creates directories and files with
// their fill, applies the cache mode and writes the manifest. Opens each plan's sandbox.
Result<PrepareReport> PrepareSandbox(std::vector<ReplayPlan>& plans, const ReplayOptions& options);

// Page-cache state only (cold / warm / as-captured), for files already prepared.
Status ApplyCacheState(const std::vector<ReplayPlan>& plans, CacheMode mode, PrepareReport* report);

}  // namespace iotwin::replay
