// The data scope: which files of a trace a command looks at, by their resolved absolute paths.
//
// A scope is a preset (`all`, or `data`: the built-in list below) plus repeatable include and
// exclude globs. A file is in scope when its path matches an include glob (any file, when none is
// given), matches no exclude glob and is not left out by the preset. Globs are matched on the
// normalised absolute path (model::NormalizePath; relative and dirfd-relative opens resolved by
// model::TraceState) as bytes, with fnmatch(3) semantics without flags: `*` and `?` also match
// '/' (so "/data/*" covers the whole tree below /data), `[...]` is a bracket expression (`!` or
// `^` negates it; ranges and the POSIX classes [:alpha:] ... are ASCII), a backslash quotes the
// next byte. No locale: a name that is not UTF-8 matches byte for byte.
//
// The `data` preset leaves out what a program loads to run rather than the data it works on:
// - programs: /bin, /sbin, /usr/bin, /usr/sbin, /usr/local/bin, /usr/local/sbin, /usr/libexec;
// - the dynamic loader and its cache: /etc/ld.so.* (cache, preload, conf, conf.d),
//   /var/cache/ldconfig;
// - shared libraries: names ending in .so or containing .so. (libc.so.6, the loader itself,
//   Python extension modules);
// - interpreter files: any */lib/python3* or */lib64/python3* tree (the system's, a venv's,
//   conda's), */bin/python3*, pyenv (*/.pyenv/*), *.py, *.pyc and *.pth below site-packages or
//   dist-packages, *.pyc anywhere, __pycache__, pyvenv.cfg;
// - locale data: /usr/lib/locale, /usr/share/locale, /usr/share/i18n, gconv module lists, time
//   zones (/usr/share/zoneinfo, /etc/localtime);
// - every file that is not storage by model::ClassifyFile: pseudo file systems (/proc, /sys, /dev
//   except block devices), pipes, sockets, character devices, anonymous inodes.
// A file whose path is unknown (inherited without a snapshot) is in scope unless include globs
// are given or its kind leaves it out.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "model/path.h"

namespace iotwin::model {

// fnmatch(3) without flags on bytes (see above). The pattern must pass CheckGlob; a malformed
// bracket matches itself literally.
bool GlobMatch(std::string_view pattern, std::string_view text);
// A glob usable on absolute paths: not empty, starts with '/' or a wildcard ('*', '?', '['),
// no unterminated bracket expression or trailing backslash. `option` names it in the error.
Status CheckGlob(std::string_view option, std::string_view glob);

enum class ScopePreset : uint8_t { kAll = 0, kData };

// Why the `data` preset leaves a file out; kNone when it does not.
enum class DataExclusion : uint8_t {
  kNone = 0,
  kProgram,      // executables in the system's program directories
  kLoader,       // the dynamic loader's cache and configuration
  kLibrary,      // shared libraries
  kInterpreter,  // interpreter installations, sources and byte code
  kLocale,       // locale and time-zone data
  kNotStorage,   // pseudo file systems, pipes, sockets, devices, anonymous inodes
};
// "program", "loader", "library", "interpreter", "locale", "not storage"; "" for kNone.
std::string_view DataExclusionName(DataExclusion why);
// The `data` preset's verdict on a normalised absolute path (empty: unknown) of kind `kind`.
DataExclusion DataPresetExcludes(std::string_view normalized, FileKind kind);

class Scope {
 public:
  Scope() = default;  // all files

  // From option values: `preset` "all" or "data" (empty: all), include and exclude globs.
  // Errors name the option and value ("--include data/*: ...").
  static Result<Scope> Parse(std::string_view preset, const std::vector<std::string>& include,
                             const std::vector<std::string>& exclude);
  static Result<ScopePreset> ParsePreset(std::string_view text);

  // Whether the file with normalised absolute path `normalized` (empty: unknown) of kind `kind`
  // is in scope: AdmitsPath and AdmitsKind.
  bool Admits(std::string_view normalized, FileKind kind) const {
    return AdmitsPath(normalized) && AdmitsKind(kind);
  }
  // The path's part of the verdict: the globs and the preset's paths (empty: unknown).
  bool AdmitsPath(std::string_view normalized) const;
  // The kind's part: the `data` preset leaves out what is not storage.
  bool AdmitsKind(FileKind kind) const {
    return preset_ != ScopePreset::kData || IsStorage(kind);
  }
  // The executable and loader execve maps, known only by inode (model/program_images.h): the
  // `data` preset leaves them out.
  bool AdmitsProgramImages() const { return preset_ != ScopePreset::kData; }
  // A scope that admits every file (preset all, no globs): callers skip the work.
  bool IsAll() const {
    return preset_ == ScopePreset::kAll && include_.empty() && exclude_.empty();
  }
  // Include globs are given: a file needs a known path to be in scope.
  bool NeedsPath() const { return !include_.empty(); }

  ScopePreset preset() const { return preset_; }
  const std::vector<std::string>& include() const { return include_; }
  const std::vector<std::string>& exclude() const { return exclude_; }

  // One line for headers and reports: what the scope left out ("all files" for IsAll()).
  std::string Describe() const;
  // {"preset": "data", "include": [...], "exclude": [...], "description": Describe()}.
  nlohmann::json ToJson() const;

 private:
  ScopePreset preset_ = ScopePreset::kAll;
  std::vector<std::string> include_, exclude_;
};

}  // namespace iotwin::model
