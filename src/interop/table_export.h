// One CSV/JSONL table to a descriptor (`iotwin export --csv - --table NAME`); the whole export
// into a directory is ExportTables (interop/exporters.h). Schema: docs/tables.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "interop/exporters.h"

namespace iotwin::interop {

// The tables an export can write: the record tables, then `files`.
std::vector<std::string_view> TableNames();

// Writes table `table` (one of TableNames()) of `trace` to descriptor `fd`, as the same table
// in a directory would hold it (file ids the same as in the whole export); nothing when the
// trace has no row of it. Returns its rows.
Result<uint64_t> ExportTable(const std::string& trace, std::string_view table, TableFormat format,
                             int fd);

}  // namespace iotwin::interop
