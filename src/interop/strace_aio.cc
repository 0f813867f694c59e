#include "interop/strace_aio.h"

#include <algorithm>

#include "format/records.h"
#include "interop/strace_text.h"
#include "interop/symbols.h"
#include "interop/text_util.h"

namespace iotwin::interop::strace {

Status StraceAio::Submit(uint32_t pid, uint32_t tgid, const Args& a, int64_t submitted,
                         uint64_t ts) {
  if (a.size() < 3) return Status::Ok();
  std::string_view list = Trim(a[2]);
  if (list.size() < 2 || list.front() != '[') return Status::Ok();
  uint64_t ctx = UArg(a, 0);
  int64_t n = 0;
  for (auto iocb : SplitTopLevel(list.substr(1, list.size() - 2))) {
    if (n++ >= submitted) break;
    if (iocb == "...") {
      // strace -s N printed fewer iocbs than were submitted: their requests are not known.
      stats_->counters["iocbs_not_shown"] += static_cast<uint64_t>(submitted - (n - 1));
      break;
    }
    iot_async_io io{};
    InitRecord(&io, IOT_REC_ASYNC_IO);
    io.engine = IOT_AIO_ENGINE_LIBAIO;
    io.phase = IOT_AIO_SUBMIT;
    io.opcode = LibaioOpcode(FieldValue(iocb, "aio_lio_opcode"));
    io.ts = ts;
    io.ctx = ctx;
    io.user_data = ParseCUnsigned(FieldValue(iocb, "aio_data")).value_or(0);
    FdText fd = ParseFd(FieldValue(iocb, "aio_fildes"));
    io.fd = static_cast<int32_t>(fd.number.value_or(-1));
    io.offset = static_cast<uint64_t>(ParseCInt(FieldValue(iocb, "aio_offset")).value_or(0));
    std::string_view nbytes = FieldValue(iocb, "aio_nbytes");
    io.aflags = IOT_AIOF_BYTES;
    if (!nbytes.empty()) {
      io.length = ParseCUnsigned(nbytes).value_or(0);
    } else {
      std::vector<uint64_t> lens;
      bool complete = false;
      io.length = IovTotal(FieldValue(iocb, "aio_buf"), &lens, &complete);
      io.iov_count = static_cast<uint16_t>(std::min<size_t>(lens.size(), UINT16_MAX));
      if (!complete) {
        stats_->counters["aio_length_unknown"]++;
        io.length = 0;
        io.aflags = IOT_AIOF_IOV_FAULT;  // readers take the completion's result
      }
    }
    io.rw_flags = static_cast<uint32_t>(FlagsValue(FieldValue(iocb, "aio_rw_flags")).value_or(0));
    io.tgid = tgid;
    io.tid = pid;
    inflight_[tgid][{ctx, io.user_data}] = Request{io.opcode, io.fd, io.offset, io.length};
    IOTWIN_RETURN_IF_ERROR(out_->Emit(io));
  }
  return Status::Ok();
}

Status StraceAio::Complete(uint32_t pid, uint32_t tgid, const Args& a, uint64_t ts) {
  if (a.size() < 4) return Status::Ok();
  std::string_view list = Trim(a[3]);
  if (list.size() < 2 || list.front() != '[') return Status::Ok();
  uint64_t ctx = UArg(a, 0);
  for (auto ev : SplitTopLevel(list.substr(1, list.size() - 2))) {
    iot_async_io io{};
    InitRecord(&io, IOT_REC_ASYNC_IO);
    io.engine = IOT_AIO_ENGINE_LIBAIO;
    io.phase = IOT_AIO_COMPLETE;
    io.ts = ts;
    io.ctx = ctx;
    io.user_data = ParseCUnsigned(FieldValue(ev, "data")).value_or(0);
    io.res = ParseCInt(FieldValue(ev, "res")).value_or(0);
    io.tgid = tgid;
    io.tid = pid;
    io.fd = -1;
    auto& requests = inflight_[tgid];
    if (auto it = requests.find({ctx, io.user_data}); it != requests.end()) {
      io.opcode = it->second.opcode;
      io.fd = it->second.fd;
      io.offset = it->second.offset;
      io.length = it->second.length;
      requests.erase(it);
    }
    IOTWIN_RETURN_IF_ERROR(out_->Emit(io));
  }
  return Status::Ok();
}

void StraceAio::RenameProcess(uint32_t from, uint32_t to) {
  if (auto a = inflight_.find(from); a != inflight_.end()) {
    inflight_[to] = std::move(a->second);
    inflight_.erase(from);
  }
}

}  // namespace iotwin::interop::strace
