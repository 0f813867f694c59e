// PathMapper: where a recorded path lives in the replay sandbox.
//
// Every recorded path is absolute and normalised by the model (no "." or ".." components), so
// appending it to a target prefix can never climb out of that prefix. Recorded paths under a
// --map prefix (longest match wins) go below that map's target; all others go below the root.
// Symlink targets the workload creates are rewritten to the mapped absolute target, so a
// symlink created by the replay points inside the sandbox too. Existing directories under the
// targets are checked with openat2(RESOLVE_BENEATH) before replay (CheckBeneath) so that a
// symlink already present in a mapped directory cannot lead outside it.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace iotwin::replay {

class PathMapper {
 public:
  // `root` and map targets must be absolute; they are normalised.
  static Result<PathMapper> Create(const std::string& root,
                                   const std::vector<std::pair<std::string, std::string>>& maps);

  // The target path of a recorded absolute, normalised path.
  std::string Map(std::string_view recorded) const;
  // The base (root or map target) a recorded path maps under.
  const std::string& BaseOf(std::string_view recorded) const;
  // The target of a symlink created at recorded path `link` with recorded target string `target`
  // (relative targets are resolved from the link's directory, then mapped).
  std::string MapSymlinkTarget(std::string_view link, std::string_view target) const;

  // A copy whose root and map targets are extended with `suffix` ("/copy-1" for --amplify).
  PathMapper WithSuffix(const std::string& suffix) const;

  const std::string& root() const { return root_; }
  const std::vector<std::pair<std::string, std::string>>& maps() const { return maps_; }
  // All bases: the root, then each distinct map target.
  std::vector<std::string> Bases() const;

  // Checks that `target` (a mapped path) resolves beneath its base even through the symlinks
  // that exist now: the longest existing prefix is opened with openat2(RESOLVE_BENEATH |
  // RESOLVE_NO_MAGICLINKS) from the base. Nonexistent paths pass (the replay creates them
  // without following anything). Fails with a message naming the escaping path.
  Status CheckBeneath(const std::string& target) const;

 private:
  std::string root_;
  std::vector<std::pair<std::string, std::string>> maps_;  // sorted: longest prefix first
};

}  // namespace iotwin::replay
