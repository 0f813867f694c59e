// libaio requests in a strace log: io_submit's iocbs become ASYNC_IO submissions, and
// io_getevents' events their completions, matched per process by (context, aio_data).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>

#include "base/status.h"
#include "interop/importer.h"
#include "interop/strace_args.h"
#include "interop/strace_tasks.h"

namespace iotwin::interop::strace {

class StraceAio {
 public:
  StraceAio(StraceTasks* out, ImportStats* stats) : out_(out), stats_(stats) {}

  // io_submit(ctx, nr, [{aio_data=.., aio_lio_opcode=IOCB_CMD_PREAD, aio_fildes=3, ...}, ...])
  // that submitted `submitted` requests.
  Status Submit(uint32_t pid, uint32_t tgid, const Args& a, int64_t submitted, uint64_t ts);
  // io_getevents(ctx, min, nr, [{data=.., obj=.., res=4096, res2=0}, ...], timeout)
  Status Complete(uint32_t pid, uint32_t tgid, const Args& a, uint64_t ts);
  // The process is gone; readers drop its requests too.
  void DropProcess(uint32_t tgid) { inflight_.erase(tgid); }
  // The placeholder process 0 is `to`.
  void RenameProcess(uint32_t from, uint32_t to);

 private:
  // One request between io_submit and io_getevents.
  struct Request {
    uint8_t opcode = 0;
    int32_t fd = -1;
    uint64_t offset = 0, length = 0;
  };
  struct PairHash {
    size_t operator()(const std::pair<uint64_t, uint64_t>& p) const {
      return std::hash<uint64_t>()(p.first * 0x9e3779b97f4a7c15ull ^ p.second);
    }
  };

  StraceTasks* out_;
  ImportStats* stats_;
  std::unordered_map<uint32_t, std::unordered_map<std::pair<uint64_t, uint64_t>, Request, PairHash>>
      inflight_;  // tgid -> (ctx, aio_data) -> request
};

}  // namespace iotwin::interop::strace
