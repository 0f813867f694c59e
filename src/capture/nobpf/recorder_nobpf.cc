// Stand-in for recorder.cc in builds configured with IOTWIN_BUILD_BPF=OFF.
#include "capture/recorder.h"

namespace iotwin::capture {

Result<UprobeSpec> ParseUprobeSpec(const std::string& spec) {
  return Status::Unsupported("--uprobe {}: this iotwin was built without eBPF capture", spec);
}

Result<uint64_t> CgroupId(const std::string& path) {
  return Status::Unsupported("--cgroup {}: this iotwin was built without eBPF capture", path);
}

Result<RecordOutcome> Record(const RecordOptions&) {
  return Status::Unsupported(
      "this iotwin was built without eBPF capture (configure with -DIOTWIN_BUILD_BPF=ON)");
}

}  // namespace iotwin::capture
