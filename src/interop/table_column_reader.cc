// ColumnReader (table_columns.h): a trace read through the table export's context and row
// functions (table_context.h, table_schema.h) into typed columns in memory.
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "format/trace_reader.h"
#include "interop/table_columns.h"
#include "interop/table_context.h"
#include "interop/table_schema.h"
#include "model/path.h"

namespace iotwin::interop {


struct ColumnReader::Impl {
  Impl(std::unique_ptr<TraceReader> r, ColumnQuery q, bool salvage_)
      : reader(std::move(r)), query(std::move(q)), salvage(salvage_), model(*reader),
        formatter(model.flag_names()) {}
  std::unique_ptr<TraceReader> reader;
  ColumnQuery query;
  bool salvage;
  table_export::RowModel model;
  table_export::RowFormatter formatter;
  std::array<ColumnTable*, 256> by_type{};
  std::vector<std::unique_ptr<ColumnTable>> order;
  std::vector<int8_t> matches;  // per file id: -1 not yet known, 0 no, 1 yes
  ColumnQuery all_columns;      // the files table's
  std::unique_ptr<ColumnTable> files;
};

ColumnReader::ColumnReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ColumnReader::~ColumnReader() = default;

Result<std::unique_ptr<ColumnReader>> ColumnReader::Open(const std::string& trace,
                                                         ColumnQuery query, bool salvage) {
  TraceReaderOptions options;
  options.salvage = salvage;
  IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(trace, options));
  auto impl = std::make_unique<Impl>(std::move(reader), std::move(query), salvage);
  Impl* p = impl.get();
  p->query.file_matches = [p](uint32_t id) {
    if (id >= p->matches.size()) p->matches.resize(size_t{id} + 1, -1);
    if (p->matches[id] < 0) {
      p->matches[id] = model::GlobMatch(p->query.path_glob, p->model.FilePath(id)) ? 1 : 0;
    }
    return p->matches[id] == 1;
  };
  return std::unique_ptr<ColumnReader>(new ColumnReader(std::move(impl)));
}

Result<bool> ColumnReader::Read(size_t max_rows) {
  Impl& p = *impl_;
  for (;;) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* h, p.reader->Next());
    if (!h) break;
    table_export::RowContext ctx;
    if (!p.model.Context(h, &ctx)) continue;
    ColumnTable*& t = p.by_type[h->type];
    if (!t) {
      p.order.push_back(std::make_unique<ColumnTable>(
          std::string(table_export::StemOf(h->type)), &p.query));
      t = p.order.back().get();
    }
    if (!t->wanted()) continue;
    p.formatter.Row(*t, h, ctx);
    if (t->mismatched()) return Status::Internal("table {}: a row unlike the first", t->stem());
    if (t->rows() >= max_rows) return true;
  }
  const TraceDamage& damage = p.reader->damage();
  if (damage.truncated && !p.salvage) return Status::Corrupt("{}", damage.truncated_detail);
  return false;
}

std::vector<ColumnTable*> ColumnReader::Tables() const {
  std::vector<ColumnTable*> tables;
  for (const auto& t : impl_->order) {
    if (t->wanted()) tables.push_back(t.get());
  }
  return tables;
}

ColumnTable& ColumnReader::Files() {
  impl_->files =
      std::make_unique<ColumnTable>(std::string(table_export::kFilesTable), &impl_->all_columns);
  impl_->model.FilesTable(*impl_->files);
  return *impl_->files;
}

size_t ColumnReader::FileCount() const { return impl_->model.FileCount(); }
std::string_view ColumnReader::FilePath(uint32_t id) const { return impl_->model.FilePath(id); }
const TraceReader& ColumnReader::trace() const { return *impl_->reader; }

}  // namespace iotwin::interop
