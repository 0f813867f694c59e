// The schema of the CSV/JSONL export (docs/tables.md): which record type goes to which table,
// and the columns of each table, written by one row function per record type for any table type
// (the text tables of table_rows.h, the typed columns of table_columns.h).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "format/op_info.h"
#include "format/records.h"
#include "interop/flag_names.h"
#include "interop/table_rows.h"

namespace iotwin::interop {
class ColumnTable;
}

namespace iotwin::interop::table_export {

// The table of each record type; other types are left out.
struct RecordTable {
  uint16_t type;
  std::string_view stem;
};
inline constexpr RecordTable kRecordTables[] = {
    {IOT_REC_SYSCALL, "syscalls"},     {IOT_REC_PROC, "proc"},
    {IOT_REC_FD_SNAPSHOT, "fd_snapshots"}, {IOT_REC_MAP_SNAPSHOT, "map_snapshots"},
    {IOT_REC_PAGE_FAULT, "page_faults"}, {IOT_REC_PAGE_CACHE, "page_cache"},
    {IOT_REC_WRITEBACK, "writeback"},  {IOT_REC_BLOCK, "block"},
    {IOT_REC_NVME, "nvme"},            {IOT_REC_ASYNC_IO, "async_io"},
    {IOT_REC_INTENT, "intents"},       {IOT_REC_LOST, "lost"},
    {IOT_REC_CLOCK, "clocks"},         {IOT_REC_CACHE_STATE, "cache_state"},
    {IOT_REC_SUBPAGE, "subpage"},      {IOT_REC_SCHED, "sched"},
    {IOT_REC_IOVEC, "iovecs"},
};
inline constexpr std::string_view kFilesTable = "files";

// The table of records of type `type`, "unknown" for a type without one.
std::string_view StemOf(uint16_t type);

// What a row needs besides its record: the files it concerns and the trace's strings it shows
// (a path, a second path, a label), worked out in record order where the model is kept.
struct RowContext {
  uint32_t file = kNoFile, file2 = kNoFile;
  std::string_view text[2];
};

// The columns of each record table, for any table with Begin() -> a row writer, End(writer) and
// scratch() (the text tables here, or columns in memory). Holds nothing that changes once built,
// so the thread that formats rows shares it with no one who writes.
class RowFormatter {
 public:
  explicit RowFormatter(FlagNames names) : names_(std::move(names)) {
    for (uint16_t op = 0; op <= IOT_OP_MAX; op++) sets_[op] = SyscallFlagSetsOf(op);
  }

  // Writes the row of record `h` (valid, zero-extended by the reader) into table `t`: a Table
  // (table_rows.h) or a ColumnTable (table_columns.h).
  template <typename TableT>
  void Row(TableT& t, const iot_rec_hdr* h, const RowContext& ctx) const;

 private:
  template <typename TableT>
  void Put(TableT& t, const iot_syscall& s, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_proc& p, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_fd_snapshot& s, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_map_snapshot& m, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_page_fault& f, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_page_cache& c, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_writeback& w, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_block& b, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_nvme& n, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_async_io& a, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_intent& in, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_lost& l, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_clock& c, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_cache_state& c, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_subpage& s, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_sched& s, const RowContext& ctx) const;
  template <typename TableT>
  void Iovec(TableT& t, const iot_iovec& v, const iot_rec_hdr* h) const;

  FlagNames names_;
  std::array<SyscallFlagSets, IOT_OP_MAX + 1> sets_{};
};

extern template void RowFormatter::Row<Table>(Table&, const iot_rec_hdr*, const RowContext&) const;
extern template void RowFormatter::Row<ColumnTable>(ColumnTable&, const iot_rec_hdr*,
                                                    const RowContext&) const;

}  // namespace iotwin::interop::table_export
