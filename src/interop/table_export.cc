// `iotwin export --csv DIR` / `--jsonl DIR`: one table per record type plus a `files` table,
// streamed in one pass. Rows that concern a file carry a `file_id` into `files`; the meaning of
// descriptors and paths comes from model::TraceState, fed every record in order. Schema and the
// directory rules: docs/tables.md.
//
// The jobs, one per file: the row writer (table_rows.h: CSV/JSONL text into a buffer per table),
// the schema (table_schema.h: which table and which columns per record type), the context
// (table_context.h: the model and the files table), the pipeline (table_pipeline.h: a second
// thread formats the rows); this file drives them over a trace into a directory or a descriptor.
#include <algorithm>
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "base/bytes_text.h"
#include "format/records.h"
#include "format/trace_reader.h"
#include "interop/exporters.h"
#include "interop/table_context.h"
#include "interop/table_export.h"
#include "interop/table_files.h"
#include "interop/table_pipeline.h"
#include "interop/table_rows.h"
#include "interop/table_schema.h"

namespace iotwin::interop::table_export {
namespace {

// Streams the records of one trace into the tables.
class Exporter {
 public:
  Exporter(const TraceReader& reader, TableFormat format, std::string dir)
      : format_(format), dir_(std::move(dir)), model_(reader),
        formatter_(model_.flag_names()), pipeline_(formatter_) {}

  // Writes table `table` alone, to descriptor `fd`, instead of every table into the directory.
  // Every record still feeds the model, so file ids are those of the whole export.
  void WriteOnly(std::string_view table, int fd) {
    only_ = table;
    fd_ = fd;
  }

  Status Row(const iot_rec_hdr* h) {
    RowContext ctx;
    if (!model_.Context(h, &ctx)) return Status::Ok();
    IOTWIN_ASSIGN_OR_RETURN(Table * t, Get(h->type));
    if (t) pipeline_.Push(t, h, ctx);
    return Status::Ok();
  }

  // The record tables (in order of first appearance) and the files table, all written to their
  // files, not yet committed.
  Result<std::vector<std::unique_ptr<Table>>> Finish() {
    pipeline_.Finish();
    std::vector<std::unique_ptr<Table>> tables;
    for (auto& t : order_) tables.push_back(std::move(t));
    if (model_.FileCount() != 0 && (only_.empty() || only_ == kFilesTable)) {
      auto t = std::make_unique<Table>(std::string(kFilesTable), format_);
      IOTWIN_RETURN_IF_ERROR(Open(*t));
      model_.FilesTable(*t);
      tables.push_back(std::move(t));
    }
    for (auto& t : tables) IOTWIN_RETURN_IF_ERROR(t->Finish());
    return tables;
  }

 private:
  // The table of record type `type`, created and opened as its first record arrives (before
  // the formatting thread sees it); an open failure ends the export. nullptr: not written.
  Result<Table*> Get(uint16_t type) {
    if (Table* t = by_type_[type]) return t;
    if (skipped_[type]) return nullptr;
    if (!only_.empty() && StemOf(type) != only_) {
      skipped_[type] = true;
      return nullptr;
    }
    order_.push_back(std::make_unique<Table>(std::string(StemOf(type)), format_));
    IOTWIN_RETURN_IF_ERROR(Open(*order_.back()));
    return by_type_[type] = order_.back().get();
  }
  Status Open(Table& t) {
    return fd_ >= 0 ? t.file().OpenDescriptor(fd_, "standard output") : t.OpenFile(dir_);
  }

  TableFormat format_;
  std::string dir_;
  RowModel model_;
  std::string_view only_;  // WriteOnly
  int fd_ = -1;
  std::array<Table*, 256> by_type_{};
  std::array<bool, 256> skipped_{};
  std::vector<std::unique_ptr<Table>> order_;
  RowFormatter formatter_;  // after model_: built from it
  RowPipeline pipeline_;    // last: its thread writes into order_'s tables until it ends
};

}  // namespace
}  // namespace iotwin::interop::table_export

namespace iotwin::interop {

Result<TableExportResult> ExportTables(const std::string& trace, const std::string& dir,
                                       TableFormat format) {
  IOTWIN_RETURN_IF_ERROR(PrepareTableDir(dir));
  IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(trace));
  table_export::Exporter exporter(*reader, format, dir);
  for (;;) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* h, reader->Next());
    if (!h) break;
    IOTWIN_RETURN_IF_ERROR(exporter.Row(h));
  }
  IOTWIN_ASSIGN_OR_RETURN(auto tables, exporter.Finish());
  TableExportResult result;
  std::vector<TableFile*> files;
  for (auto& t : tables) {
    result.rows[t->stem()] = t->rows();
    files.push_back(&t->file());
  }
  // The header metadata and footer summary, for the context the tables leave out.
  nlohmann::json info;
  info["source"] = BytesToText(trace);
  info["meta"] = reader->meta();
  if (reader->summary()) info["summary"] = *reader->summary();
  info["tables"] = result.rows;
  const std::string text =
      info.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::vector<std::string_view> known{table_export::kFilesTable};
  for (const table_export::RecordTable& t : table_export::kRecordTables) known.push_back(t.stem);
  IOTWIN_ASSIGN_OR_RETURN(result.removed, CommitTables(dir, format, files, known, text));
  return result;
}

std::vector<std::string_view> TableNames() {
  std::vector<std::string_view> names;
  for (const table_export::RecordTable& t : table_export::kRecordTables) names.push_back(t.stem);
  names.push_back(table_export::kFilesTable);
  return names;
}

Result<uint64_t> ExportTable(const std::string& trace, std::string_view table, TableFormat format,
                             int fd) {
  const auto names = TableNames();
  if (std::find(names.begin(), names.end(), table) == names.end()) {
    return Status::Invalid("no table '{}'", BytesToText(table));
  }
  IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(trace));
  table_export::Exporter exporter(*reader, format, "");
  exporter.WriteOnly(table, fd);
  for (;;) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* h, reader->Next());
    if (!h) break;
    IOTWIN_RETURN_IF_ERROR(exporter.Row(h));
  }
  IOTWIN_ASSIGN_OR_RETURN(auto tables, exporter.Finish());
  uint64_t rows = 0;
  for (auto& t : tables) {
    rows += t->rows();
    IOTWIN_RETURN_IF_ERROR(t->file().Commit());
  }
  return rows;
}

std::string_view TableOf(uint16_t type) {
  const std::string_view stem = table_export::StemOf(type);
  return stem == "unknown" ? std::string_view() : stem;
}

}  // namespace iotwin::interop
