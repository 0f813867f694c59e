#include "analysis/filter_spec.h"

#include <charconv>

#include "format/records.h"

namespace iotwin::analysis {
namespace {

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

Result<uint32_t> ParseId(const std::string& key, const std::string& v) {
  uint32_t id = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), id);
  if (ec != std::errc() || p != v.data() + v.size())
    return Status::Invalid("--filter {}={}: expected a number", key, v);
  return id;
}

}  // namespace

Result<AnalysisFilter> ParseFilterSpecs(const std::vector<std::string>& specs,
                                        std::optional<double> from, std::optional<double> to) {
  AnalysisFilter f;
  for (const std::string& spec : specs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      return Status::Invalid("--filter {}: expected KEY=VALUE (tgid, tid, file, op, host)", spec);
    std::string key = spec.substr(0, eq), value = spec.substr(eq + 1);
    if (key == "file") {
      f.file_globs.push_back(value);  // globs may contain commas ({a,b}): keep whole
      continue;
    }
    for (const std::string& v : SplitCommas(value)) {
      if (key == "tgid" || key == "pid") {
        IOTWIN_ASSIGN_OR_RETURN(uint32_t id, ParseId(key, v));
        f.tgids.push_back(id);
      } else if (key == "tid") {
        IOTWIN_ASSIGN_OR_RETURN(uint32_t id, ParseId(key, v));
        f.tids.push_back(id);
      } else if (key == "host") {
        f.host_names.push_back(v);  // the trace's header says which hosts there are
      } else if (key == "op") {
        const std::vector<uint16_t> ops = OpsNamedBy(v);
        if (ops.empty()) {
          return Status::Invalid(
              "--filter op={}: unknown operation (a system call such as pread64, or reads, writes; "
              "e.g. op=pread64,pwrite64)",
              v);
        }
        f.ops.insert(f.ops.end(), ops.begin(), ops.end());
      } else {
        return Status::Invalid("--filter {}: unknown key '{}' (tgid, tid, file, op, host)", spec, key);
      }
    }
  }
  if (from && *from < 0) return Status::Invalid("--from {}: must not be negative", *from);
  if (to && *to < 0) return Status::Invalid("--to {}: must not be negative", *to);
  if (from && to && *to < *from) return Status::Invalid("--to {} is before --from {}", *to, *from);
  f.from_s = from;
  f.to_s = to;
  return f;
}

}  // namespace iotwin::analysis
