#include "replay/modes.h"

#include <fcntl.h>

#include <fmt/format.h>

#include "base/bytes_text.h"
#include "format/op_info.h"
#include "model/op_fields.h"

namespace iotwin::replay {

bool PassesMode(const iot_syscall& sc) {
  switch (sc.op) {
    case IOT_OP_MKDIR:
    case IOT_OP_MKDIRAT:
    case IOT_OP_CREAT: return true;
    case IOT_OP_OPEN:
    case IOT_OP_OPENAT:
    case IOT_OP_OPENAT2:
      return (model::EffectiveOpenFlags(sc) & O_CREAT) != 0 ||
             (sc.flags & __O_TMPFILE) != 0;
    default: return false;
  }
}

nlohmann::json ModeChangesJson(const model::TraceModel& model, bool keep_modes) {
  uint64_t changed = 0;
  nlohmann::json example;
  for (const model::Thread& th : model.threads()) {
    for (uint32_t i = 0; i < th.ops.size(); i++) {
      const model::Op& op = th.ops[i];
      if (op.kind != model::OpKind::kSyscall || op.skip != model::Skip::kReplayable) continue;
      if (!PassesMode(op.sc)) continue;
      const uint32_t applied = AppliedMode(op.sc.mode, keep_modes);
      if (applied == (op.sc.mode & 07777)) continue;
      if (changed++ == 0) {
        example = {{"op", std::string(GetOpInfo(op.sc.op).name)},
                   {"tid", th.tid},
                   {"index", i},
                   {"path", op.path == model::kNone ? std::string() : BytesToText(model.path(op.path))},
                   {"recorded", fmt::format("{:04o}", op.sc.mode & 07777)},
                   {"applied", fmt::format("{:04o}", applied)}};
      }
    }
  }
  nlohmann::json out = {{"changed", changed}, {"keep_modes", keep_modes}};
  if (changed > 0) out["example"] = example;
  return out;
}

std::string ModeChangesText(const nlohmann::json& modes) {
  if (!modes.is_object() || modes.value("changed", uint64_t{0}) == 0) return {};
  const nlohmann::json& e = modes["example"];
  return fmt::format(
      "  modes      {} created with other permissions than recorded (set-id bits are never "
      "applied{}), e.g. {} {}: recorded {}, applied {}\n",
      modes["changed"].get<uint64_t>(),
      modes.value("keep_modes", false) ? "" : ", group/other write only with --keep-modes",
      e.value("op", ""), e.value("path", ""), e.value("recorded", ""), e.value("applied", ""));
}

}  // namespace iotwin::replay
