#include "cli/report_hosts.h"

#include <fmt/format.h>

#include "analysis/report_text.h"
#include "base/json_fields.h"
#include "format/hosts.h"
#include "format/trace_reader.h"

namespace iotwin::cli {
namespace {

nlohmann::json HostRow(const std::string& name, const nlohmann::json& totals, uint64_t job_start) {
  auto u = [&](const char* path) { return json_fields::GetUint(totals, path, 0); };
  auto since = [&](uint64_t ts) { return ts >= job_start ? ts - job_start : 0; };
  return {{"name", name},
          {"syscalls", u("syscalls")},
          {"errors", u("errors")},
          {"read", {{"ops", u("read/ops")}, {"bytes", u("read/bytes")}}},
          {"write", {{"ops", u("write/ops")}, {"bytes", u("write/bytes")}}},
          {"first_ns", since(u("first_ts_ns"))},
          {"last_ns", since(u("last_ts_ns"))}};
}

}  // namespace

Result<nlohmann::json> HostFigures(const std::string& path,
                                   const analysis::TraceAnalysisOptions& options) {
  nlohmann::json meta;
  {
    IOTWIN_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, TraceReader::Open(path));
    meta = reader->meta();
  }
  const std::vector<std::string> names = HostNames(meta);
  if (names.size() < 2) return nlohmann::json(nullptr);
  const uint64_t job_start = json_fields::GetUint(meta, "host/anchor/monotonic_ns", 0);
  nlohmann::json rows = nlohmann::json::array();
  for (const std::string& name : names) {
    const auto& wanted = options.analyzer.filter.host_names;
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), name) == wanted.end()) continue;
    analysis::TraceAnalysisOptions one = options;
    one.progress = false;
    one.analyzer.filter.host_names = {name};
    IOTWIN_ASSIGN_OR_RETURN(analysis::TraceAnalysis a, analysis::AnalyzeTraceFile(path, one));
    rows.push_back(HostRow(name, a.model["totals"], job_start));
  }
  nlohmann::json hosts = {{"rows", std::move(rows)}};
  if (const nlohmann::json* merge = json_fields::Object(meta, "merge")) hosts["merge"] = *merge;
  return hosts;
}

Status CheckHostNames(const std::string& path, const std::vector<std::string>& names) {
  if (names.empty()) return Status::Ok();
  IOTWIN_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, TraceReader::Open(path));
  return ResolveHostNames(reader->meta(), names).status();
}

std::string RenderHostsText(const nlohmann::json& model) {
  const nlohmann::json* hosts = json_fields::Object(model, "hosts");
  if (!hosts) return "";
  using analysis::FormatBytes;
  using analysis::FormatCount;
  std::string out = "\nHosts\n";
  out += fmt::format("  {:<20} {:>12} {:>12} {:>10} {:>12} {:>10} {:>9} {:>9}\n", "host",
                     "syscalls", "read ops", "read", "write ops", "written", "first s", "last s");
  if (const nlohmann::json* rows = json_fields::Array(*hosts, "rows")) {
    for (const nlohmann::json& r : *rows) {
      auto u = [&](const char* p) { return json_fields::GetUint(r, p, 0); };
      out += fmt::format("  {:<20} {:>12} {:>12} {:>10} {:>12} {:>10} {:>9.3f} {:>9.3f}\n",
                         json_fields::GetString(r, "name"), FormatCount(u("syscalls")),
                         FormatCount(u("read/ops")), FormatBytes(static_cast<double>(u("read/bytes"))),
                         FormatCount(u("write/ops")),
                         FormatBytes(static_cast<double>(u("write/bytes"))),
                         static_cast<double>(u("first_ns")) / 1e9,
                         static_cast<double>(u("last_ns")) / 1e9);
    }
  }
  if (const nlohmann::json* merge = json_fields::Object(*hosts, "merge")) {
    const nlohmann::json* u = json_fields::Find(*merge, "uncertainty_ns");
    out += fmt::format("  clocks: {} on {}'s clock; uncertainty {}\n",
                       json_fields::GetString(*merge, "alignment"),
                       json_fields::GetString(*merge, "reference"),
                       u && u->is_number_unsigned()
                           ? fmt::format("{} ns", u->get<uint64_t>())
                           : std::string("not measured (realtime clocks taken to agree)"));
  }
  return out;
}

}  // namespace iotwin::cli
