#include "interop/strace_args.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <xxhash.h>

#include <charconv>
#include <unordered_map>

#include "format/op_info.h"
#include "interop/strace_text.h"
#include "interop/symbols.h"
#include "interop/text_util.h"
#include "model/op_fields.h"

namespace iotwin::interop::strace {

std::optional<int64_t> IntArg(const Args& a, size_t i) {
  if (i >= a.size()) return std::nullopt;
  std::string_view s = a[i];
  if (s == "NULL") return 0;
  // Pointers to offsets print as "[4096]" or "[0 => 4096]" (value at entry first).
  if (!s.empty() && s[0] == '[') {
    s.remove_prefix(1);
    size_t end = s.find_first_of(" ]");
    s = s.substr(0, end);
  }
  if (auto v = ParseCInt(s)) return v;
  if (auto f = FlagsValue(s)) return static_cast<int64_t>(*f);
  return std::nullopt;
}

uint64_t UArg(const Args& a, size_t i) { return static_cast<uint64_t>(IntArg(a, i).value_or(0)); }

uint64_t OffsetPointerArg(const Args& a, size_t i) {
  if (i < a.size() && a[i] == "NULL") return model::kNoOffset;
  return UArg(a, i);
}

uint32_t FlagsArg(const Args& a, size_t i) {
  if (i >= a.size()) return 0;
  return static_cast<uint32_t>(FlagsValue(a[i]).value_or(0));
}

std::optional<uint32_t> RangeBound(const Args& a, size_t i) {
  if (i >= a.size()) return std::nullopt;
  const std::optional<int64_t> v = ParseFd(a[i]).number;
  if (!v || *v < INT32_MIN || *v > int64_t{UINT32_MAX}) return std::nullopt;
  return static_cast<uint32_t>(*v);
}

uint32_t FcntlCommand(std::string_view text) {
  text = Trim(text);
  if (text == "F_GETLK64") return F_GETLK;
  if (text == "F_SETLK64") return F_SETLK;
  if (text == "F_SETLKW64") return F_SETLKW;
  return static_cast<uint32_t>(FlagsValue(text).value_or(0));
}

bool IsLockCommand(uint32_t cmd) {
  return cmd == F_GETLK || cmd == F_SETLK || cmd == F_SETLKW || cmd == F_OFD_GETLK ||
         cmd == F_OFD_SETLK || cmd == F_OFD_SETLKW;
}

std::optional<uint64_t> LockSymbols(std::string_view expr) {
  static const std::unordered_map<std::string_view, uint64_t> kNames = {
      {"F_RDLCK", F_RDLCK}, {"F_WRLCK", F_WRLCK}, {"F_UNLCK", F_UNLCK}, {"LOCK_SH", LOCK_SH},
      {"LOCK_EX", LOCK_EX}, {"LOCK_NB", LOCK_NB}, {"LOCK_UN", LOCK_UN}};
  expr = Trim(expr);
  if (expr.empty()) return std::nullopt;
  uint64_t v = 0;
  for (size_t pos = 0; pos <= expr.size();) {
    size_t bar = expr.find('|', pos);
    std::string_view part = Trim(expr.substr(pos, bar == std::string_view::npos ? bar : bar - pos));
    if (auto it = kNames.find(part); it != kNames.end())
      v |= it->second;
    else if (auto n = ParseCUnsigned(part))
      v |= *n;
    else
      return std::nullopt;
    if (bar == std::string_view::npos) break;
    pos = bar + 1;
  }
  return v;
}

void LockRequest(std::string_view arg, iot_syscall* sc, std::map<std::string, uint64_t>* counters) {
  std::string_view group = FirstBraceGroup(arg);
  auto type = LockSymbols(FieldValue(group, "l_type"));
  if (group.empty() || !type) {
    sc->flags = static_cast<uint32_t>(-1);
    (*counters)["lock_request_unknown"]++;
    return;
  }
  sc->flags = static_cast<uint32_t>(*type);
  if ((sc->mode == F_GETLK || sc->mode == F_OFD_GETLK) && *type == F_UNLCK) {
    sc->flags = F_WRLCK;
    (*counters)["lock_query_type_assumed"]++;
  }
  sc->aux = FlagsValue(FieldValue(group, "l_whence")).value_or(SEEK_SET);
  sc->offset = static_cast<uint64_t>(ParseCInt(FieldValue(group, "l_start")).value_or(0));
  sc->length = static_cast<uint64_t>(ParseCInt(FieldValue(group, "l_len")).value_or(0));
}

uint64_t IovTotal(std::string_view iov, std::vector<uint64_t>* lens, bool* complete) {
  *complete = false;
  iov = Trim(iov);
  if (iov.size() < 2 || iov.front() != '[' || iov.back() != ']') return 0;
  iov = iov.substr(1, iov.size() - 2);
  *complete = true;
  uint64_t total = 0;
  for (auto part : SplitTopLevel(iov)) {
    auto v = ParseCUnsigned(FieldValue(part, "iov_len"));
    if (!v) {
      *complete = false;
      continue;
    }
    if (__builtin_add_overflow(total, *v, &total)) total = UINT64_MAX;
    lens->push_back(*v);
  }
  return total;
}

void StatFields(std::string_view stat_text, iot_syscall* sc) {
  static constexpr std::pair<std::string_view, uint8_t> kTypes[] = {
      {"S_IFDIR", S_IFDIR >> 12},  {"S_IFREG", S_IFREG >> 12}, {"S_IFLNK", S_IFLNK >> 12},
      {"S_IFCHR", S_IFCHR >> 12},  {"S_IFBLK", S_IFBLK >> 12}, {"S_IFIFO", S_IFIFO >> 12},
      {"S_IFSOCK", S_IFSOCK >> 12}};
  std::string_view mode = FieldValue(stat_text, "st_mode");
  if (mode.empty()) mode = FieldValue(stat_text, "stx_mode");
  for (const auto& [name, type] : kTypes) {
    if (mode.substr(0, name.size()) == name &&
        (mode.size() == name.size() || mode[name.size()] == '|')) {
      sc->ftype = type;
    }
  }
  if (sc->ftype != (S_IFREG >> 12)) return;
  std::string_view size = FieldValue(stat_text, "st_size");
  if (size.empty()) size = FieldValue(stat_text, "stx_size");
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(size.data(), size.data() + size.size(), v);
  if (ec == std::errc() && end == size.data() + size.size() && !size.empty()) sc->fsize = v;
}

uint8_t LibaioOpcode(std::string_view text) {
  constexpr std::string_view kPrefix = "IOCB_CMD_";
  if (StartsWith(text, kPrefix) && text.size() > kPrefix.size()) {
    const std::string_view name = text.substr(kPrefix.size());
    for (unsigned op = 0; op < 255; op++) {
      if (AsyncOp(IOT_AIO_ENGINE_LIBAIO, static_cast<uint8_t>(op)).name == name) {
        return static_cast<uint8_t>(op);
      }
    }
  }
  return static_cast<uint8_t>(ParseCUnsigned(text).value_or(255));
}

uint64_t PathIdentity(std::string_view target) {
  uint64_t h = XXH3_64bits(target.data(), target.size());
  return h == 0 ? 1 : h;
}

std::string Basename(std::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

}  // namespace iotwin::interop::strace
