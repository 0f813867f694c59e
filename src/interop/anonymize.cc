#include "base/bytes_text.h"
#include "interop/anonymize.h"

#include <fcntl.h>
#include <sodium.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "format/records.h"
#include "format/trace_reader.h"
#include "format/trace_writer.h"
#include "interop/record_sink.h"
#include "interop/text_util.h"
#include "model/path.h"

namespace iotwin::interop {

namespace {

constexpr std::string_view kContext = "iotwin-anonymize-v1";

std::string Base32(const uint8_t* p, size_t n, size_t chars) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (size_t i = 0; i < n && out.size() < chars; i++) {
    buffer = (buffer << 8) | p[i];
    bits += 8;
    while (bits >= 5 && out.size() < chars) {
      out.push_back(kAlphabet[(buffer >> (bits - 5)) & 31]);
      bits -= 5;
    }
  }
  return out;
}

bool ExtensionChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

}  // namespace

Result<Anonymizer> Anonymizer::FromKey(std::string_view secret, AnonymizeOptions options) {
  if (sodium_init() < 0) return Status::Internal("libsodium failed to initialise");
  if (secret.size() < 16) {
    return Status::Invalid("anonymization key has {} bytes; it needs at least 16 (e.g. head -c 32 "
                           "/dev/urandom > key)",
                           secret.size());
  }
  Anonymizer a;
  a.options_ = std::move(options);
  // The hashing key: BLAKE2b of the secret, keyed with the context string so that keys used
  // elsewhere for other purposes give unrelated tokens.
  crypto_generichash(a.key_.data(), a.key_.size(), reinterpret_cast<const uint8_t*>(secret.data()),
                     secret.size(), reinterpret_cast<const uint8_t*>(kContext.data()),
                     kContext.size());
  for (auto& p : a.options_.keep_prefixes) p = model::NormalizePath(p);
  return a;
}

Result<Anonymizer> Anonymizer::FromKeyFile(const std::string& path, AnonymizeOptions options) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno(errno, "cannot open key file " + path);
  std::string secret;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "cannot read key file " + path);
    }
    if (n == 0) break;
    secret.append(buf, static_cast<size_t>(n));
    if (secret.size() > (1u << 20)) return Status::Invalid("key file {} is larger than 1 MiB", path);
  }
  auto a = FromKey(secret, std::move(options));
  sodium_memzero(secret.data(), secret.size());
  if (!a.ok()) return a.status().WithContext(path);
  return a;
}

Status Anonymizer::CreateKeyFile(const std::string& path) {
  if (sodium_init() < 0) return Status::Internal("libsodium failed to initialise");
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return Status::FromErrno(errno, "cannot create key file " + path);
  uint8_t key[kNewKeyBytes];
  randombytes_buf(key, sizeof key);
  size_t done = 0;
  Status st = Status::Ok();
  while (done < sizeof key) {
    ssize_t n = ::write(fd.get(), key + done, sizeof key - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      st = Status::FromErrno(n < 0 ? errno : EIO, "cannot write key file " + path);
      break;
    }
    done += static_cast<size_t>(n);
  }
  sodium_memzero(key, sizeof key);
  if (st.ok() && ::fsync(fd.get()) != 0) st = Status::FromErrno(errno, "cannot sync key file " + path);
  if (!st.ok()) ::unlink(path.c_str());  // never leave a short key that looks usable
  return st;
}

std::string Anonymizer::Token(std::string_view name) const {
  uint8_t out[16];
  crypto_generichash(out, sizeof out, reinterpret_cast<const uint8_t*>(name.data()), name.size(),
                     key_.data(), key_.size());
  return Base32(out, sizeof out, kTokenChars);
}

uint64_t Anonymizer::Inode(uint32_t dev, uint64_t ino) const {
  if (ino == 0) return 0;
  uint8_t in[13] = {'i'};
  std::memcpy(in + 1, &dev, 4);
  std::memcpy(in + 5, &ino, 8);
  uint8_t out[16];
  crypto_generichash(out, sizeof out, in, sizeof in, key_.data(), key_.size());
  uint64_t v;
  std::memcpy(&v, out, 8);
  return v ? v : 1;
}

std::string Anonymizer::Component(std::string_view c) const {
  if (c.empty() || c == "." || c == "..") return std::string(c);
  std::string token = Token(c);
  if (options_.keep_extensions) {
    size_t dot = c.rfind('.');
    if (dot != std::string_view::npos && dot > 0 && c.size() - dot - 1 >= 1 &&
        c.size() - dot - 1 <= 16) {
      std::string_view ext = c.substr(dot + 1);
      bool ok = true;
      for (char ch : ext) ok = ok && ExtensionChar(ch);
      if (ok) token += "." + std::string(ext);
    }
  }
  return token;
}

namespace {

// Components of a normalised absolute path ("/a/b" -> {"a", "b"}; "/" -> {}).
std::vector<std::string_view> Components(std::string_view normalized) {
  std::vector<std::string_view> out;
  size_t i = 1;
  while (i < normalized.size()) {
    size_t slash = normalized.find('/', i);
    if (slash == std::string_view::npos) slash = normalized.size();
    out.push_back(normalized.substr(i, slash - i));
    i = slash + 1;
  }
  return out;
}

// Components [0, n) lead to a link into the real file system: /proc/PID/root, /proc/PID/cwd,
// /proc/PID/fd/N (PID also "self", "thread-self" or "PID/task/TID"), /dev/fd/N. Returns n, or 0.
size_t MagicLinkDepth(const std::vector<std::string_view>& c) {
  if (c.size() >= 3 && c[0] == "dev" && c[1] == "fd" && AllDigits(c[2])) return 3;
  if (c.size() < 3 || c[0] != "proc") return 0;
  if (c[1] != "self" && c[1] != "thread-self" && !AllDigits(c[1])) return 0;
  size_t j = 2;
  if (c.size() > 4 && c[2] == "task" && AllDigits(c[3])) j = 4;
  if (c[j] == "root" || c[j] == "cwd") return j + 1;
  if (c[j] == "fd" && c.size() > j + 1 && AllDigits(c[j + 1])) return j + 2;
  return 0;
}

// Kernel directories below /dev whose entries the kernel (or udev, from hardware) names.
constexpr std::string_view kDevKernelDirs[] = {
    "block", "bsg",   "bus",  "char", "cpu",   "disk", "dma_heap", "dri",  "fd",
    "input", "net",   "pts",  "snd",  "usb",   "vfio", "v4l",      "serial", "vhost-net"};
// Directories whose entries users or programs name.
constexpr std::string_view kDevUserDirs[] = {"shm", "mqueue", "hugepages", "mapper"};
constexpr std::string_view kDiskUserDirs[] = {"by-label", "by-partlabel"};

template <size_t N>
bool OneOf(std::string_view s, const std::string_view (&set)[N]) {
  for (auto v : set) {
    if (s == v) return true;
  }
  return false;
}

// How many leading components of a normalised absolute path are kernel-provided names, kept
// verbatim; the components after them are hashed.
size_t KernelComponents(const std::vector<std::string_view>& c) {
  if (c.empty()) return 0;
  if (size_t link = MagicLinkDepth(c)) return link;  // what lies behind the link is user data
  if (c[0] == "proc") return c.size();
  if (c[0] == "sys") {
    // cgroup names are chosen by users and service managers (alice.slice, app.service).
    if (c.size() >= 3 && c[1] == "fs" && c[2] == "cgroup") return 3;
    return c.size();
  }
  if (c[0] == "dev") {
    // /dev/NAME is a device node, or a directory (a user-named one shows its name: see
    // docs/interop.md); entries of user directories are hashed.
    if (c.size() <= 2) return c.size();
    if (OneOf(c[1], kDevUserDirs)) return 2;
    if (c[1] == "disk" && OneOf(c[2], kDiskUserDirs)) return 3;
    if (OneOf(c[1], kDevKernelDirs)) return c.size();
    // Another directory below /dev: an LVM volume group (/dev/VG/LV) or a driver's; names in
    // it may be chosen by users.
    return 1;
  }
  return 0;
}

// True when `path`, read component by component as the kernel would, passes through a magic
// link before a ".." : "/proc/self/root/../x" is "/x" for the kernel, not "/proc/self/x" as
// lexical normalisation says.
bool DotDotAfterMagicLink(std::string_view path) {
  std::vector<std::string_view> stack;
  size_t i = 0;
  while (i < path.size()) {
    size_t slash = path.find('/', i);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view c = path.substr(i, slash - i);
    i = slash + 1;
    if (c.empty() || c == ".") continue;
    if (c == "..") {
      // MagicLinkDepth looks at the leading components only: the stack is at or below a link.
      if (MagicLinkDepth(stack) != 0) return true;
      if (!stack.empty()) stack.pop_back();
      continue;
    }
    stack.push_back(c);
  }
  return false;
}

}  // namespace

std::string Anonymizer::HashComponents(std::string_view path) const {
  std::string out;
  size_t i = 0;
  while (i < path.size()) {
    size_t slash = path.find('/', i);
    if (slash == std::string_view::npos) slash = path.size();
    out += Component(path.substr(i, slash - i));
    if (slash < path.size()) out += '/';
    i = slash + 1;
  }
  return out;
}

std::string Anonymizer::Path(std::string_view path) const {
  if (path.empty()) return {};
  // Relative names are hashed whole: what they name depends on a directory not known here.
  if (path[0] != '/') return HashComponents(path);
  // Which names are the kernel's is decided on the normalised path, so that spellings such as
  // "/dev/../home/x" or "/dev//shm/x" cannot pass user names through as kernel names.
  std::string normalized = model::NormalizePath(path);
  bool user_prefix = false;
  for (const auto& p : options_.keep_prefixes) {
    user_prefix = user_prefix || model::PathIsWithin(normalized, p);
  }
  if (user_prefix) return normalized;
  std::vector<std::string_view> c = Components(normalized);
  size_t kept = KernelComponents(c);
  if (kept == 0 || DotDotAfterMagicLink(path)) {
    // Not below a kernel prefix: every component hashed, the spelling (//, ., ..) kept.
    return HashComponents(path);
  }
  // Kernel names in their normalised spelling (the original one could hide a user name before a
  // ".."), then the user-named rest hashed.
  std::string out;
  for (size_t i = 0; i < c.size(); i++) {
    out += '/';
    out += i < kept ? std::string(c[i]) : Component(c[i]);
  }
  return out.empty() ? "/" : out;
}

namespace {

nlohmann::json AnonymizeMeta(const nlohmann::json& in, const Anonymizer& a,
                             std::vector<std::string>* dropped) {
  nlohmann::json out = nlohmann::json::object();
  // Header strings hold names as text (base/bytes_text.h): hashed as the bytes they stand for,
  // so that they get the tokens the same names get in the string table.
  auto anonymize_text = [&](const std::string& text) {
    return BytesToText(a.Path(TextToBytes(text).value_or(text)));
  };
  auto path_or_token = [&](const nlohmann::json& v) -> nlohmann::json {
    if (!v.is_string()) return v.is_number() || v.is_boolean() ? v : nlohmann::json();
    return anonymize_text(v.get<std::string>());
  };
  for (const auto& [key, value] : in.items()) {
    if (key == "tool" || key == "layers" || key == "lba_sizes") {
      out[key] = value;
    } else if (key == "host" && value.is_object()) {
      nlohmann::json host = value;
      if (host.contains("hostname") && host["hostname"].is_string()) {
        host["hostname"] = a.Token(host["hostname"].get<std::string>());
      }
      out[key] = host;
    } else if (key == "command") {
      if (value.is_array()) {
        nlohmann::json argv = nlohmann::json::array();
        for (const auto& arg : value) argv.push_back(path_or_token(arg));
        out[key] = argv;
      } else if (value.is_object()) {
        nlohmann::json cmd = nlohmann::json::object();
        for (const auto& [k, v] : value.items()) {
          if (k == "pids") {
            cmd[k] = v;
          } else if (v.is_string()) {
            cmd[k] = anonymize_text(v.get<std::string>());
          }
        }
        out[key] = cmd;
      }
    } else if (key == "import" && value.is_object()) {
      nlohmann::json imp = nlohmann::json::object();
      if (value.contains("format")) imp["format"] = value["format"];
      if (value.contains("source")) {
        const auto& src = value["source"];
        if (src.is_array()) {
          imp["source"] = nlohmann::json::array();
          for (const auto& s : src) imp["source"].push_back(path_or_token(s));
        } else {
          imp["source"] = path_or_token(src);
        }
      }
      out[key] = imp;
    } else if (key == "replay" && value.is_object()) {
      nlohmann::json rep = nlohmann::json::object();
      if (value.contains("pace")) rep["pace"] = value["pace"];
      if (value.contains("source")) rep["source"] = path_or_token(value["source"]);
      out[key] = rep;
    } else if (key == "anonymized") {
      // Anonymizing twice: the new description replaces the old one.
    } else {
      // Unknown keys might hold names: dropped, and listed (names only).
      dropped->push_back(key);
    }
  }
  return out;
}

nlohmann::json AnonymizeSummary(const nlohmann::json& in) {
  nlohmann::json out = nlohmann::json::object();
  if (!in.is_object()) return out;
  for (const char* k : {"stop_reason", "exit_status", "lost", "duration_ns"}) {
    if (in.contains(k)) out[k] = in[k];
  }
  if (in.contains("import") && in["import"].is_object()) {
    nlohmann::json imp = nlohmann::json::object();
    for (const auto& [k, v] : in["import"].items()) {
      // Examples of unknown lines quote the source text: never copied.
      if (k != "unknown_examples") imp[k] = v;
    }
    out["import"] = imp;
  }
  return out;
}

void AnonymizeComm(char* comm, size_t n, const Anonymizer& a) {
  size_t len = 0;
  while (len < n && comm[len]) len++;
  if (len == 0) return;
  std::string t = a.Comm(std::string_view(comm, len)).substr(0, n - 1);
  std::memset(comm, 0, n);
  std::memcpy(comm, t.data(), t.size());
}

}  // namespace

Result<AnonymizeResult> AnonymizeTrace(const std::string& input, const std::string& output,
                                       const Anonymizer& anonymizer) {
  IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(input));
  AnonymizeResult result;
  nlohmann::json meta = AnonymizeMeta(reader->meta(), anonymizer, &result.meta_keys_dropped);
  nlohmann::json kept = nlohmann::json::array(
      {"/", "/proc (but what lies behind /proc/PID/root, /proc/PID/cwd, /proc/PID/fd/N)",
       "/sys (but cgroup names below /sys/fs/cgroup)",
       "/dev (but entries of /dev/shm, /dev/mqueue, /dev/hugepages, /dev/mapper, "
       "/dev/disk/by-label, /dev/disk/by-partlabel and of directories not known as the kernel's)"});
  for (const auto& p : anonymizer.options().keep_prefixes) kept.push_back(BytesToText(p));
  meta["anonymized"] = {{"version", 1},
                        {"hash", "keyed BLAKE2b (libsodium crypto_generichash), base32, per path component"},
                        {"keep_extensions", anonymizer.options().keep_extensions},
                        {"kept_prefixes", kept},
                        {"meta_keys_dropped", result.meta_keys_dropped}};
  // An OutputFile (base/output_file.h): a private temporary, renamed over `output` by Finish
  // when complete and removed if anything fails.
  IOTWIN_ASSIGN_OR_RETURN(std::unique_ptr<TraceWriter> writer, TraceWriter::Create(output, meta));

  std::unordered_map<uint32_t, uint32_t> ids;
  auto remap = [&](uint32_t id) -> uint32_t {
    if (id == 0) return 0;
    auto it = ids.find(id);
    return it == ids.end() ? 0 : it->second;
  };
  std::vector<uint64_t> buf(65536 / 8);
  std::map<std::string, uint64_t> events;
  Status st;
  for (;;) {
    auto next = reader->Next();
    if (!next.ok()) {
      st = next.status();
      break;
    }
    const iot_rec_hdr* h = *next;
    if (!h) break;
    if (h->type == IOT_REC_STRING) {
      const auto& s = As<iot_string>(h);
      std::string_view bytes = reader->String(s.id);
      auto id = writer->InternString(anonymizer.Path(bytes), s.flags & IOT_STRF_TRUNCATED);
      if (!id.ok()) {
        st = id.status();
        break;
      }
      ids[s.id] = *id;
      result.strings++;
      continue;
    }
    // Copy the fields this build knows; fields appended by newer writers could hold string ids
    // and are dropped. IOVEC and FDLIST keep their variable tails (lengths; descriptor numbers
    // and file identities).
    size_t size = h->type == IOT_REC_IOVEC || h->type == IOT_REC_FDLIST ? h->size
                                                                       : RecordFixedSize(h->type);
    if (size == 0 || size > buf.size() * 8 || size > h->size) continue;
    std::memcpy(buf.data(), h, size);
    auto* rec = reinterpret_cast<iot_rec_hdr*>(buf.data());
    rec->size = static_cast<uint16_t>(size);
    switch (rec->type) {
      case IOT_REC_SYSCALL: {
        auto* r = reinterpret_cast<iot_syscall*>(rec);
        r->path_id = remap(r->path_id);
        r->path2_id = remap(r->path2_id);
        r->ino = anonymizer.Inode(r->dev, r->ino);
        break;
      }
      case IOT_REC_PROC: {
        auto* r = reinterpret_cast<iot_proc*>(rec);
        r->path_id = remap(r->path_id);
        AnonymizeComm(r->comm, sizeof r->comm, anonymizer);
        break;
      }
      case IOT_REC_FD_SNAPSHOT: {
        auto* r = reinterpret_cast<iot_fd_snapshot*>(rec);
        r->path_id = remap(r->path_id);
        r->ino = anonymizer.Inode(r->dev, r->ino);
        break;
      }
      case IOT_REC_MAP_SNAPSHOT: {
        auto* r = reinterpret_cast<iot_map_snapshot*>(rec);
        r->path_id = remap(r->path_id);
        r->ino = anonymizer.Inode(r->dev, r->ino);
        break;
      }
      case IOT_REC_CACHE_STATE: {
        auto* r = reinterpret_cast<iot_cache_state*>(rec);
        r->path_id = remap(r->path_id);
        r->ino = anonymizer.Inode(r->dev, r->ino);
        break;
      }
      case IOT_REC_PAGE_FAULT: {
        auto* r = reinterpret_cast<iot_page_fault*>(rec);
        r->ino = anonymizer.Inode(r->dev, r->ino);
        break;
      }
      case IOT_REC_PAGE_CACHE: {
        auto* r = reinterpret_cast<iot_page_cache*>(rec);
        r->ino = anonymizer.Inode(r->dev, r->ino);
        break;
      }
      case IOT_REC_WRITEBACK: {
        auto* r = reinterpret_cast<iot_writeback*>(rec);
        r->ino = anonymizer.Inode(r->dev, r->ino);
        break;
      }
      case IOT_REC_SUBPAGE: {
        auto* r = reinterpret_cast<iot_subpage*>(rec);
        r->ino = anonymizer.Inode(r->dev, r->ino);
        break;
      }
      case IOT_REC_INTENT:
        reinterpret_cast<iot_intent*>(rec)->label_id =
            remap(reinterpret_cast<iot_intent*>(rec)->label_id);
        break;
      case IOT_REC_BLOCK: {
        auto* r = reinterpret_cast<iot_block*>(rec);
        AnonymizeComm(r->comm, sizeof r->comm, anonymizer);
        r->ino = anonymizer.Inode(r->ino_dev, r->ino);
        break;
      }
      default:
        break;
    }
    st = writer->Append(rec);
    if (!st.ok()) break;
    events[std::string(RecordTypeName(rec->type))]++;
    result.records++;
  }
  if (!st.ok()) {
    writer->Discard();
    return st;
  }
  result.unknown_records_dropped = reader->damage().unknown_records;
  result.input_truncated = reader->damage().truncated;
  nlohmann::json summary =
      AnonymizeSummary(reader->summary() ? *reader->summary() : nlohmann::json::object());
  summary["events"] = events;
  if (result.input_truncated) summary["anonymized_from_truncated_trace"] = true;
  Status finished = writer->Finish(summary);
  if (!finished.ok()) {
    writer->Discard();
    return finished;
  }
  return result;
}

}  // namespace iotwin::interop
