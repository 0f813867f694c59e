#include "base/status.h"

#include <cstring>

namespace iotwin {

Status Status::FromErrno(int err, std::string_view what) {
  Code code = Code::kIo;
  if (err == ENOENT) code = Code::kNotFound;
  if (err == EACCES || err == EPERM) code = Code::kPermission;
  return Status(code, fmt::format("{}: {}", what, std::strerror(err)));
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return message_;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, fmt::format("{}: {}", context, message_));
}

}  // namespace iotwin
