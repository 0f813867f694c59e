#include "interop/record_sink.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include <fmt/format.h>

#include "format/records.h"

namespace iotwin::interop {

namespace {

// Whether the record carries a time (RecordTimestamp reads 0 for those that do not; 0 is also a
// real time: blkparse and strace -r start at 0).
bool HasTimestamp(const iot_rec_hdr* rec) {
  switch (rec->type) {
    case IOT_REC_STRING: return false;
    case IOT_REC_IOVEC: return rec->size >= offsetof(iot_iovec, ts) + sizeof(uint64_t);
    default: return rec->size >= 16;
  }
}

}  // namespace

void RecordSink::Count(const iot_rec_hdr* rec) {
  counts_[std::string(RecordTypeName(rec->type))]++;
  if (HasTimestamp(rec)) {
    uint64_t ts = RecordTimestamp(rec);
    min_ts_ = std::min(min_ts_, ts);
    max_ts_ = std::max(max_ts_, ts);
  }
  if (rec->type == IOT_REC_LOST && rec->size >= sizeof(iot_lost)) {
    iot_lost l;
    std::memcpy(&l, rec, sizeof l);
    uint64_t& v = lost_[{l.source, l.cpu}];
    v = std::max(v, l.count);
  }
}

std::map<std::string, uint64_t> RecordSink::LostTotals() const {
  std::map<std::string, uint64_t> out;
  for (const auto& [key, count] : lost_) out[std::string(SourceName(key.first))] += count;
  return out;
}

void TraceFileSink::MergeMeta(const nlohmann::json& more) {
  for (const auto& [k, v] : more.items()) {
    if (k == "host" && meta_.contains("host") && meta_["host"].is_object() && v.is_object()) {
      for (const auto& [hk, hv] : v.items()) meta_["host"][hk] = hv;
    } else {
      meta_[k] = v;
    }
  }
}

TraceFileSink::TraceFileSink(std::string path, nlohmann::json meta)
    : path_(std::move(path)), meta_(std::move(meta)) {}

void TraceFileSink::SetClock(const nlohmann::json& host_clock) {
  if (clock_set_) return;
  clock_set_ = true;
  if (!meta_.contains("host") || !meta_["host"].is_object()) meta_["host"] = nlohmann::json::object();
  for (const auto& [k, v] : host_clock.items()) meta_["host"][k] = v;
}

Status TraceFileSink::Open() {
  if (writer_) return Status::Ok();
  IOTWIN_ASSIGN_OR_RETURN(writer_, TraceWriter::Create(path_, meta_));
  size_t next_string = 0, next_record = 0;
  for (bool is_string : held_order_) {
    if (is_string) {
      const auto& [bytes, truncated] = held_strings_[next_string];
      IOTWIN_ASSIGN_OR_RETURN(uint32_t id, writer_->InternString(bytes, truncated));
      if (id != next_string + 1) {
        return Status::Internal("{}: string id {} replayed as {}", path_, next_string + 1, id);
      }
      next_string++;
    } else {
      IOTWIN_RETURN_IF_ERROR(writer_->Append(
          reinterpret_cast<const iot_rec_hdr*>(held_records_[next_record].data())));
      next_record++;
    }
  }
  held_ids_.clear();
  held_strings_.clear();
  held_records_.clear();
  held_order_.clear();
  return Status::Ok();
}

Result<uint32_t> TraceFileSink::InternString(std::string_view s) {
  bool truncated = s.size() > IOT_STRING_MAX;
  if (truncated) {
    s = s.substr(0, IOT_STRING_MAX);
    strings_truncated_++;
  }
  if (!writer_ && clock_set_) IOTWIN_RETURN_IF_ERROR(Open());
  if (writer_) return writer_->InternString(s, truncated);
  auto it = held_ids_.find(std::string(s));
  if (it != held_ids_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(held_strings_.size() + 1);
  held_ids_.emplace(std::string(s), id);
  held_strings_.emplace_back(std::string(s), truncated);
  held_order_.push_back(true);
  return id;
}

Status TraceFileSink::Append(const iot_rec_hdr* rec) {
  Count(rec);
  if (!writer_ && (clock_set_ || held_records_.size() >= kMaxHeld)) IOTWIN_RETURN_IF_ERROR(Open());
  if (writer_) return writer_->Append(rec);
  const auto* p = reinterpret_cast<const uint8_t*>(rec);
  held_records_.emplace_back(p, p + rec->size);
  held_order_.push_back(false);
  return Status::Ok();
}

Status TraceFileSink::Finish(nlohmann::json summary) {
  IOTWIN_RETURN_IF_ERROR(Open());
  nlohmann::json events = nlohmann::json::object();
  for (const auto& [k, v] : counts_) {
    if (k != "string") events[k] = v;
  }
  summary["events"] = events;
  return writer_->Finish(summary);
}

Result<uint32_t> MemorySink::InternString(std::string_view s) {
  if (s.size() > IOT_STRING_MAX) {
    s = s.substr(0, IOT_STRING_MAX);
    strings_truncated_++;
  }
  auto it = ids_.find(std::string(s));
  if (it != ids_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(strings_.size() + 1);
  ids_.emplace(std::string(s), id);
  strings_.emplace_back(s);
  return id;
}

Status MemorySink::Append(const iot_rec_hdr* rec) {
  if (rec->size < sizeof(iot_rec_hdr)) return Status::Invalid("record of size {}", rec->size);
  Count(rec);
  const auto* p = reinterpret_cast<const uint8_t*>(rec);
  records_.emplace_back(p, p + rec->size);
  return Status::Ok();
}

Result<ExclusiveFile> ExclusiveFile::Create(const std::string& path) {
  ExclusiveFile f;
  f.path_ = path;
  f.fd_.Reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!f.fd_.valid()) {
    int err = errno;
    if (err == EEXIST) {
      return Status::Invalid("{} already exists (a file or a symlink: another run writing, or one "
                             "that crashed); refusing to write through it, remove it first",
                             path);
    }
    return Status::FromErrno(err, "cannot create " + path);
  }
  std::string via_proc = fmt::format("/proc/self/fd/{}", f.fd_.get());
  // Without /proc the name is used: it was created just now, exclusively.
  f.writer_path_ = ::access(via_proc.c_str(), W_OK) == 0 ? via_proc : path;
  return f;
}

void ExclusiveFile::Remove() {
  struct stat by_fd, by_name;
  if (fd_.valid() && ::fstat(fd_.get(), &by_fd) == 0 && ::lstat(path_.c_str(), &by_name) == 0 &&
      by_fd.st_dev == by_name.st_dev && by_fd.st_ino == by_name.st_ino) {
    ::unlink(path_.c_str());
  }
}

std::string_view MemorySink::String(uint32_t id) const {
  if (id == 0 || id > strings_.size()) return {};
  return strings_[id - 1];
}

}  // namespace iotwin::interop
