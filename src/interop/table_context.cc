#include "interop/table_context.h"

#include "interop/table_columns.h"
#include "model/op_fields.h"
#include "model/path.h"

namespace iotwin::interop::table_export {

// The file a call concerns: the identity it recorded, else the open file behind its data
// descriptor (or the one it opened), else its first path as resolved; and the second file
// (a copy's destination, a rename's or link's new path).
RowContext RowModel::Prepare(const iot_syscall& s) {
  const bool path_readable = !(s.sflags & (IOT_SCF_PATH_TRUNC | IOT_SCF_PATH_FAULT));
  // Paths resolve against the cwd and descriptors as they were before the call.
  std::optional<std::string> resolved;
  if (s.path_id && path_readable && model::OpTakesPath(s.op)) {
    resolved = state_.Resolve(s.tgid, model::PathDirFd(s), reader_.String(s.path_id));
  }
  RowContext ctx;
  ctx.text[0] = TextOrEmpty(s.path_id);
  ctx.text[1] = TextOrEmpty(s.path2_id);
  const int second_fd = model::SecondFd(s);
  if (second_fd >= 0) {
    if (const auto* d2 = state_.FdDescription(s.tgid, second_fd)) {
      ctx.file2 = files_.OfDescription(*d2);
    }
  } else if (s.path2_id && path_readable && model::OpTakesPath2(s.op)) {
    auto resolved2 = state_.Resolve(s.tgid, model::Path2DirFd(s), reader_.String(s.path2_id));
    if (resolved2) ctx.file2 = files_.ByPath(*resolved2, FileIds::kNoType);
  }
  const model::SyscallEffect e = state_.OnSyscall(s, Text(s.path_id), Text(s.path2_id));
  const model::OpenFileDescription* d =
      state_.Description(e.created != model::kNoDescription ? e.created : e.desc);
  std::string_view path = d && !d->path.empty() ? std::string_view(d->path)
                          : resolved            ? std::string_view(*resolved)
                                                : std::string_view();
  if (s.ino != 0 && !(s.sflags & IOT_SCF_NO_FILE)) {
    ctx.file = files_.ByIdentity(s.dev, s.ino, path, s.ftype);
  } else if (d && (d->ino != 0 || !d->path.empty())) {
    ctx.file = files_.OfDescription(*d);
  } else if (!path.empty()) {
    ctx.file = files_.ByPath(path, FileIds::kNoType);
  }
  return ctx;
}

RowContext RowModel::Prepare(const iot_proc& p) {
  state_.OnProc(p, Text(p.path_id));
  RowContext ctx;
  ctx.text[0] = TextOrEmpty(p.path_id);
  return ctx;
}

RowContext RowModel::Prepare(const iot_fd_snapshot& s) {
  const model::DescriptionId id = state_.OnFdSnapshot(s, Text(s.path_id));
  RowContext ctx;
  ctx.text[0] = TextOrEmpty(s.path_id);
  if (const model::OpenFileDescription* d = state_.Description(id)) {
    ctx.file = s.ino != 0 ? files_.ByIdentity(s.dev, s.ino, d->path, s.ftype)
                          : files_.OfDescription(*d);
  } else if (s.ino != 0) {
    ctx.file = files_.ByIdentity(s.dev, s.ino, {}, s.ftype);
  }
  return ctx;
}

RowContext RowModel::Prepare(const iot_map_snapshot& m) {
  state_.OnMapSnapshot(m, Text(m.path_id));
  RowContext ctx;
  ctx.text[0] = TextOrEmpty(m.path_id);
  const model::FileMapping* map = m.end > m.start ? state_.MappingAt(m.tgid, m.start) : nullptr;
  const model::OpenFileDescription* d = map ? state_.Description(map->desc) : nullptr;
  if (m.ino != 0) {
    ctx.file = files_.ByIdentity(m.dev, m.ino, d ? std::string_view(d->path) : "",
                                 FileIds::kNoType);
  } else if (d) {
    ctx.file = files_.OfDescription(*d);
  }
  return ctx;
}

RowContext RowModel::Prepare(const iot_async_io& a) {
  RowContext ctx;
  if (a.fd >= 0) {
    if (const auto* d = state_.FdDescription(a.tgid, a.fd)) ctx.file = files_.OfDescription(*d);
  }
  return ctx;
}

RowContext RowModel::Prepare(const iot_cache_state& c) {
  RowContext ctx;
  ctx.text[0] = TextOrEmpty(c.path_id);
  std::string path;
  if (c.path_id) {
    const std::string_view text = reader_.String(c.path_id);
    if (!text.empty() && text[0] == '/') path = model::NormalizePath(text);
  }
  if (c.ino != 0) {
    ctx.file = files_.ByIdentity(c.dev, c.ino, path, FileIds::kNoType);
  } else if (!path.empty()) {
    ctx.file = files_.ByPath(path, FileIds::kNoType);
  }
  return ctx;
}

template <class T>
void RowModel::FilesTable(T& t) const {
  const auto& entries = files_.entries();
  for (size_t id = 0; id < entries.size(); id++) {
    const FileIds::Entry& f = entries[id];
    const model::FileKind kind =
        model::ClassifyFile(f.ftype, f.path, types_recorded_ && f.untyped && f.ftype == 0);
    auto w = t.Begin();
    w.U("file_id", id);
    w.U("dev", f.dev);
    w.U("ino", f.ino);
    w.U("ftype", f.ftype);
    w.Word("kind", model::FileKindKey(kind));
    w.S("path", f.path, &t.scratch());
    t.End(w);
  }
}

template void RowModel::FilesTable<Table>(Table&) const;
template void RowModel::FilesTable<ColumnTable>(ColumnTable&) const;

}  // namespace iotwin::interop::table_export
