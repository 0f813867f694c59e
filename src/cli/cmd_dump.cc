// `iotwin dump`: verify a trace file and print its header, summary, damage and (optionally) records.
#include <cstdio>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/unit_options.h"
#include "format/record_text.h"
#include "format/records.h"
#include "format/trace_reader.h"

namespace iotwin::cli {

namespace {

// dump --json: schema iotwin-dump/1.
nlohmann::json DumpJson(const TraceReader& r, const std::map<std::string_view, uint64_t>& counts) {
  const TraceDamage& d = r.damage();
  nlohmann::json records = nlohmann::json::object();
  for (const auto& [name, n] : counts) records[std::string(name)] = n;
  return {{"schema", "iotwin-dump/1"},
          {"format", fmt::format("{}.{}", r.format_major(), r.format_minor())},
          {"meta", r.meta()},
          {"records", records},
          {"summary", r.summary() ? *r.summary() : nlohmann::json(nullptr)},
          {"damage",
           {{"truncated", d.truncated},
            {"truncated_at", d.truncated_at},
            {"truncated_detail", d.truncated_detail},
            {"skipped_chunks", d.skipped_chunks},
            {"unknown_records", d.unknown_records}}},
          {"whole", !d.truncated && d.skipped_chunks.empty()}};
}

}  // namespace

CommandSpec SetupDump(CLI::App& parent) {
  struct Options {
    std::string path;
    bool records = false;
    bool salvage = false;
    bool json = false;
    uint64_t limit = 0;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = parent.add_subcommand(
      "dump",
      "Verify a trace file; print its header, summary, damage and optionally its records. Exits "
      "2 when the trace is damaged or truncated, unless --salvage");
  sub->add_option("trace", opt->path, "trace file")->required();
  sub->add_flag("--records", opt->records, "print every record, one line each");
  sub->add_option("--limit", opt->limit, "print at most N records (0: all)")
      ->check(Count());
  sub->add_flag("--json", opt->json,
                "print header, record counts, summary and damage as one JSON object "
                "(schema iotwin-dump/1, docs/user-guide.md)")
      ->excludes("--records");
  sub->add_flag("--salvage", opt->salvage,
                "skip damaged chunks and accept a truncated trace: print what can be read, exit 0");
  return {sub, [opt] {
            TraceReaderOptions ro;
            ro.salvage = opt->salvage;
            auto reader = TraceReader::Open(opt->path, ro);
            if (!reader.ok()) {
              fmt::print(stderr, "iotwin dump: {}\n", reader.status().message());
              return kExitError;
            }
            TraceReader& r = **reader;
            // The header and footer were parsed as JSON, so they hold valid UTF-8; `replace`
            // only guarantees that printing them can never throw.
            constexpr auto kNoThrow = nlohmann::json::error_handler_t::replace;
            if (!opt->json) {
              fmt::print("format {}.{}\nmeta {}\n", r.format_major(), r.format_minor(),
                         r.meta().dump(-1, ' ', false, kNoThrow));
            }
            std::map<std::string_view, uint64_t> counts;
            uint64_t printed = 0;
            for (;;) {
              auto next = r.Next();
              if (!next.ok()) {
                fmt::print(stderr, "iotwin dump: {}\n", next.status().message());
                return kExitError;
              }
              const iot_rec_hdr* rec = *next;
              if (!rec) break;
              counts[RecordTypeName(rec->type)]++;
              if (opt->records && (opt->limit == 0 || printed < opt->limit)) {
                fmt::print("{}\n", RecordToText(rec, &r));
                printed++;
              }
            }
            const TraceDamage& d = r.damage();
            if (opt->json) {
              fmt::print("{}\n", DumpJson(r, counts).dump(-1, ' ', false, kNoThrow));
            } else {
              for (const auto& [name, n] : counts) fmt::print("records {} {}\n", name, n);
              if (r.summary()) fmt::print("summary {}\n", r.summary()->dump(-1, ' ', false, kNoThrow));
            }
            if (d.unknown_records && !opt->json) {
              fmt::print("unknown records skipped: {}\n", d.unknown_records);
            }
            for (const auto& s : d.skipped_chunks) {
              fmt::print(stderr, "iotwin dump: damaged: {}\n", s);
            }
            if (d.truncated) {
              fmt::print(stderr, "iotwin dump: truncated: {}\n", d.truncated_detail);
            }
            // dump verifies: a trace that is not whole fails it, unless the caller asked for
            // what can be salvaged, which is then what was printed.
            bool damaged = d.truncated || !d.skipped_chunks.empty();
            if (damaged && !opt->salvage) {
              fmt::print(stderr, "iotwin dump: {}: the trace is damaged (above); --salvage prints "
                         "what can be read and exits 0\n", opt->path);
              return kExitError;
            }
            return kExitOk;
          }};
}

}  // namespace iotwin::cli
