#include "base/bytes_text.h"
#include "interop/importer.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include <fmt/format.h>

#include "interop/line_reader.h"
#include "interop/text_util.h"

namespace iotwin::interop {

namespace {
constexpr size_t kMaxExamples = 10;
constexpr size_t kDetectBytes = 64 * 1024;
}  // namespace

std::string_view ImportFormatName(ImportFormat f) {
  switch (f) {
    case ImportFormat::kAuto:
      return "auto";
    case ImportFormat::kStrace:
      return "strace";
    case ImportFormat::kFtraceBlock:
      return "ftrace-block";
    case ImportFormat::kBlkparse:
      return "blkparse";
    case ImportFormat::kBpftraceCsv:
      return "bpftrace-csv";
    case ImportFormat::kFioIolog:
      return "fio-iolog";
  }
  return "?";
}

std::optional<ImportFormat> ImportFormatFromName(std::string_view name) {
  for (auto f : {ImportFormat::kAuto, ImportFormat::kStrace, ImportFormat::kFtraceBlock,
                 ImportFormat::kBlkparse, ImportFormat::kBpftraceCsv, ImportFormat::kFioIolog}) {
    if (ImportFormatName(f) == name) return f;
  }
  return std::nullopt;
}

namespace {

bool LooksLikeCsv(std::string_view line) {
  // nsecs, rwbs, bytes, sector, nr_sector
  std::vector<std::string_view> f;
  size_t pos = 0;
  for (;;) {
    size_t c = line.find(',', pos);
    f.push_back(Trim(line.substr(pos, c == std::string_view::npos ? c : c - pos)));
    if (c == std::string_view::npos) break;
    pos = c + 1;
  }
  if (f.size() != 5) return false;
  return AllDigits(f[0]) && !f[1].empty() && AllDigits(f[2]) && AllDigits(f[3]) &&
         AllDigits(f[4]);
}

bool LooksLikeBlkparse(std::string_view line) {
  auto t = SplitWhitespace(line);
  if (t.size() < 7) return false;
  size_t comma = t[0].find(',');
  if (comma == std::string_view::npos || !AllDigits(t[0].substr(0, comma)) ||
      !AllDigits(t[0].substr(comma + 1))) {
    return false;
  }
  size_t dot = t[3].find('.');
  return AllDigits(t[1]) && AllDigits(t[2]) && dot != std::string_view::npos &&
         AllDigits(t[3].substr(0, dot)) && AllDigits(t[4]) && t[5].size() <= 2;
}

bool LooksLikeFtraceBlock(std::string_view line) {
  size_t ev = line.find(": block_");
  if (ev == std::string_view::npos) return false;
  size_t br = line.find('[');
  return br != std::string_view::npos && br < ev;
}

bool LooksLikeStrace(std::string_view line) {
  if (line.find("<unfinished ...>") != std::string_view::npos ||
      line.find(" resumed>") != std::string_view::npos ||
      line.find("+++ exited with") != std::string_view::npos ||
      line.find("+++ killed by") != std::string_view::npos ||
      line.find("--- SIG") != std::string_view::npos) {
    return true;
  }
  size_t paren = line.find('(');
  size_t eq = line.rfind(") = ");
  return paren != std::string_view::npos && eq != std::string_view::npos && eq > paren;
}

}  // namespace

std::optional<ImportFormat> DetectFormat(std::string_view head) {
  if (StartsWith(head, "fio version 2 iolog") || StartsWith(head, "fio version 3 iolog")) {
    return ImportFormat::kFioIolog;
  }
  int csv = 0, blk = 0, ftrace = 0, strace = 0, lines = 0;
  size_t pos = 0;
  while (pos < head.size() && lines < 200) {
    size_t nl = head.find('\n', pos);
    if (nl == std::string_view::npos) break;  // ignore a possibly cut last line
    std::string_view line = TrimRight(head.substr(pos, nl - pos));
    pos = nl + 1;
    if (Trim(line).empty()) continue;
    lines++;
    if (StartsWith(line, "# tracer:")) ftrace += 5;
    if (StartsWith(line, "Attaching ") && line.find("probe") != std::string_view::npos) csv += 2;
    if (LooksLikeCsv(line)) csv++;
    if (LooksLikeBlkparse(line)) blk++;
    if (LooksLikeFtraceBlock(line)) ftrace++;
    if (LooksLikeStrace(line)) strace++;
  }
  int best = std::max({csv, blk, ftrace, strace});
  if (best == 0) return std::nullopt;
  if (best == ftrace) return ImportFormat::kFtraceBlock;
  if (best == blk) return ImportFormat::kBlkparse;
  if (best == csv) return ImportFormat::kBpftraceCsv;
  return ImportFormat::kStrace;
}

nlohmann::json ImportStats::ToJson() const {
  nlohmann::json j;
  j["lines"] = lines;
  j["blank_lines"] = blank_lines;
  j["comment_lines"] = comment_lines;
  j["unknown_lines"] = unknown_lines;
  j["cut_lines"] = cut_lines;
  nlohmann::json ex = nlohmann::json::array();
  for (const auto& e : unknown_examples) {
    ex.push_back({{"source", BytesToText(e.source)},
                  {"line", e.line},
                  {"offset", e.offset},
                  {"reason", BytesToText(e.reason)},
                  {"text", e.text}});
  }
  j["unknown_examples"] = ex;
  // Keys name what the input said (an ftrace event, a blkparse action): bytes, escaped.
  nlohmann::json skipped_json = nlohmann::json::object();
  for (const auto& [name, n] : skipped) skipped_json[BytesToText(name)] = n;
  j["skipped"] = skipped_json;
  nlohmann::json counters_json = nlohmann::json::object();
  for (const auto& [name, n] : counters) counters_json[BytesToText(name)] = n;
  j["counters"] = counters_json;
  return j;
}

std::string Importer::Where(const LinePos& pos) {
  return fmt::format("{}:{} (byte {})", pos.source, pos.line, pos.offset);
}

Status Importer::Unknown(const LinePos& pos, std::string_view text, std::string_view reason) {
  if (options_.strict) {
    return Status::Corrupt("{}: {}: '{}'", Where(pos), reason, Excerpt(text));
  }
  stats_.unknown_lines++;
  if (stats_.unknown_examples.size() < kMaxExamples) {
    stats_.unknown_examples.push_back(
        {std::string(pos.source), pos.line, pos.offset, std::string(reason), Excerpt(text)});
  }
  return Status::Ok();
}

std::unique_ptr<Importer> MakeImporter(ImportFormat format, RecordSink* sink,
                                       const ImportOptions& options) {
  switch (format) {
    case ImportFormat::kStrace:
      return MakeStraceImporter(sink, options);
    case ImportFormat::kFtraceBlock:
      return MakeFtraceBlockImporter(sink, options);
    case ImportFormat::kBlkparse:
      return MakeBlkparseImporter(sink, options);
    case ImportFormat::kBpftraceCsv:
      return MakeBpftraceCsvImporter(sink, options);
    case ImportFormat::kFioIolog:
      return MakeFioIologImporter(sink, options);
    case ImportFormat::kAuto:
      break;
  }
  return nullptr;
}

Status FeedImporter(Importer* importer, std::vector<LineReader>* inputs) {
  struct Cursor {
    std::string_view line;
    bool has = false;
    bool done = false;
    uint64_t key = 0;
  };
  std::vector<Cursor> cur(inputs->size());
  auto advance = [&](size_t i) -> Status {
    LineReader& r = (*inputs)[i];
    std::string_view line;
    IOTWIN_ASSIGN_OR_RETURN(bool got, r.Next(&line));
    if (!got) {
      cur[i].done = true;
      cur[i].has = false;
      return Status::Ok();
    }
    cur[i].line = line;
    cur[i].has = true;
    if (auto k = importer->MergeKey(line)) cur[i].key = *k;
    return Status::Ok();
  };
  auto feed = [&](size_t i) -> Status {
    LineReader& r = (*inputs)[i];
    ImportStats& st = importer->stats();
    st.lines++;
    if (r.line_cut()) st.cut_lines++;
    LinePos pos{r.name(), static_cast<uint32_t>(i), r.line_number(), r.line_offset()};
    if (Trim(cur[i].line).empty()) {
      st.blank_lines++;
      return Status::Ok();
    }
    return importer->Line(cur[i].line, pos);
  };
  for (size_t i = 0; i < inputs->size(); i++) {
    IOTWIN_RETURN_IF_ERROR(importer->BeginSource(static_cast<uint32_t>(i), (*inputs)[i].name()));
  }
  if (inputs->size() == 1) {
    for (;;) {
      IOTWIN_RETURN_IF_ERROR(advance(0));
      if (cur[0].done) break;
      IOTWIN_RETURN_IF_ERROR(feed(0));
    }
    return importer->Finish();
  }
  for (size_t i = 0; i < inputs->size(); i++) IOTWIN_RETURN_IF_ERROR(advance(i));
  for (;;) {
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < cur.size(); i++) {
      if (!cur[i].has) continue;
      if (best == SIZE_MAX || cur[i].key < cur[best].key) best = i;
    }
    if (best == SIZE_MAX) break;
    IOTWIN_RETURN_IF_ERROR(feed(best));
    // The LineReader reuses its buffer: the line is consumed before reading the next one.
    IOTWIN_RETURN_IF_ERROR(advance(best));
  }
  return importer->Finish();
}

// An import that produced no record is refused rather than written as an empty trace that looks
// whole: the input is most often not in the format named (a CSV read as strace), or a log of a
// program that did no file I/O. The message says which, from the line counts.
Status RefuseEmptyImport(const ImportStats& st, ImportFormat format, const std::string& input) {
  uint64_t skipped = 0;
  for (const auto& [name, n] : st.skipped) skipped += n;
  std::string message = fmt::format(
      "{}: no record imported as {} from {} lines ({} unknown, {} recognised with no iotwin "
      "record, {} blank, {} comments)",
      BytesToText(input), ImportFormatName(format), st.lines, st.unknown_lines, skipped,
      st.blank_lines, st.comment_lines);
  if (!st.unknown_examples.empty()) {
    const auto& e = st.unknown_examples.front();
    message += fmt::format("; first unknown line {}:{} (byte {}): {}: {}", BytesToText(e.source),
                           e.line, e.offset, e.reason, e.text);
  }
  if (st.unknown_lines > 0) {
    message += fmt::format("; is the input {} output? name its format with --format",
                           ImportFormatName(format));
  } else if (skipped > 0) {
    message += "; the program did no file I/O that iotwin records";
  }
  return Status::Invalid("{}", message);
}

Result<ImportResult> RunImport(const ImportRequest& request) {
  if (request.inputs.empty()) return Status::Invalid("import: no input");
  if (request.output.empty()) return Status::Invalid("import: no output file (-o)");
  ImportFormat format = request.format;
  std::vector<std::string> prefixes(request.inputs.size());
  if (format == ImportFormat::kAuto) {
    IOTWIN_ASSIGN_OR_RETURN(prefixes[0], LineReader::Peek(request.inputs[0], kDetectBytes));
    auto f = DetectFormat(prefixes[0]);
    if (!f) {
      return Status::Invalid(
          "{}: cannot tell the format from the first {} bytes; name it with --format",
          request.inputs[0], prefixes[0].size());
    }
    format = *f;
  }
  std::vector<LineReader> readers;
  for (size_t i = 0; i < request.inputs.size(); i++) {
    IOTWIN_ASSIGN_OR_RETURN(LineReader r, LineReader::Open(request.inputs[i], prefixes[i]));
    readers.push_back(std::move(r));
  }

  // Written through an OutputFile (base/output_file.h): a private temporary renamed over the
  // name when complete, never through a planted symlink; a failed import leaves nothing there.
  TraceFileSink sink(request.output, nlohmann::json::object());
  auto importer = MakeImporter(format, &sink, request.options);
  if (!importer) return Status::Internal("no importer for format {}", ImportFormatName(format));
  nlohmann::json meta = importer->Meta();
  nlohmann::json sources = nlohmann::json::array();
  for (const auto& in : request.inputs) sources.push_back(BytesToText(in));
  meta["import"] = {{"format", ImportFormatName(format)}, {"source", sources}};
  sink.MergeMeta(meta);

  Status st = FeedImporter(importer.get(), &readers);
  if (st.ok() && sink.counts().empty()) {
    st = RefuseEmptyImport(importer->stats(), format, request.inputs[0]);
  }
  if (!st.ok()) {
    sink.Discard();
    return st;
  }
  if (sink.strings_truncated() > 0) {
    importer->stats().counters["names_truncated"] += sink.strings_truncated();
  }
  nlohmann::json summary;
  summary["stop_reason"] = "imported";
  summary["import"] = importer->stats().ToJson();
  summary["import"]["format"] = ImportFormatName(format);
  summary["lost"] = sink.LostTotals();
  summary["duration_ns"] = sink.max_ts() - sink.min_ts();
  st = sink.Finish(summary);
  if (!st.ok()) {
    sink.Discard();
    return st;
  }
  ImportResult result;
  result.format = format;
  result.stats = importer->stats();
  result.records = sink.counts();
  return result;
}

}  // namespace iotwin::interop
