// Helpers of the runtime tests that run a static iotwin in the emulated NVMe guest
// (tools/nvme-guest, docs/nvme-guest.md): which static iotwin to carry, booting the guest with a
// script, and reading a trace's NVME, BLOCK and SYSCALL records.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/records.h"
#include "format/trace_reader.h"
#include "runtime_util.h"

namespace iotwin::test {

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One line of nvme_guest_probe's log: "op=read|write offset=BYTES bytes=BYTES" or "op=flush".
struct ProbeOp {
  std::string op;
  uint64_t offset = 0, bytes = 0;
};

inline std::vector<ProbeOp> ParseProbeLog(const std::string& text) {
  std::vector<ProbeOp> ops;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("op=", 0) != 0) continue;
    ProbeOp p;
    char op[16] = {};
    unsigned long long off = 0, bytes = 0;
    if (sscanf(line.c_str(), "op=%15s offset=%llu bytes=%llu", op, &off, &bytes) >= 1) {
      p.op = op;
      p.offset = off;
      p.bytes = bytes;
      ops.push_back(p);
    }
  }
  return ops;
}

// A trace's header and its NVME, BLOCK and SYSCALL records, in file order.
struct GuestTrace {
  nlohmann::json meta;
  std::vector<iot_nvme> nvme;
  std::vector<iot_block> block;
  std::vector<iot_syscall> calls;
  std::string error;
};

inline GuestTrace LoadGuestTrace(const std::string& path) {
  GuestTrace t;
  auto r = TraceReader::Open(path);
  if (!r.ok()) {
    t.error = r.status().message();
    return t;
  }
  t.meta = (*r)->meta();
  for (;;) {
    auto rec = (*r)->Next();
    if (!rec.ok()) {
      t.error = rec.status().message();
      break;
    }
    if (!*rec) break;
    const iot_rec_hdr* h = *rec;
    if (h->type == IOT_REC_NVME) t.nvme.push_back(As<iot_nvme>(h));
    if (h->type == IOT_REC_BLOCK) t.block.push_back(As<iot_block>(h));
    if (h->type == IOT_REC_SYSCALL) t.calls.push_back(As<iot_syscall>(h));
  }
  return t;
}

#if defined(IOTWIN_NVME_GUEST_DIR)

inline bool IsStatic(const std::string& path) {
  RunResult r = Run({"/bin/sh", "-c", "LC_ALL=C readelf -l \"$0\"", path}, 30);
  return r.exit_code == 0 && r.out.find("Requesting program interpreter") == std::string::npos;
}

// The iotwin to carry into the guest: IOTWIN_NVME_GUEST_IOTWIN, else the one under test when it
// is static, else the build's iotwin-static (the same objects linked -static); empty when none.
inline std::string StaticIotwin() {
  if (const char* bin = getenv("IOTWIN_NVME_GUEST_IOTWIN"); bin && *bin) return bin;
  if (IsStatic(IotwinBin())) return IotwinBin();
#ifdef IOTWIN_STATIC_BIN
  return IOTWIN_STATIC_BIN;
#else
  return "";
#endif
}

constexpr const char* kNoStaticIotwin =
    "no static iotwin: configure a build with -DIOTWIN_STATIC=ON (its iotwin_runtime_tests uses "
    "its own) or set IOTWIN_NVME_GUEST_IOTWIN";

// tools/nvme-guest/setup.sh (packages and the guest kernel; a check when done before).
inline RunResult NvmeGuestSetup() {
  return Run({std::string(IOTWIN_NVME_GUEST_DIR) + "/setup.sh"}, 600);
}

// Boots the guest with `script` (its text), the static binaries `binaries` in /bin and `files`
// in /data; the script's results land in OUT/results. Returns run.sh's result.
inline RunResult BootNvmeGuest(const std::string& script_text, const std::string& out,
                               const std::vector<std::string>& binaries,
                               const std::vector<std::string>& files, int lba_size,
                               int timeout_s = 150) {
  const std::string script = out + ".sh";
  std::ofstream(script) << script_text;
  std::vector<std::string> argv = {std::string(IOTWIN_NVME_GUEST_DIR) + "/run.sh", "--binary"};
  argv.insert(argv.end(), binaries.begin(), binaries.end());
  if (!files.empty()) {
    argv.push_back("--file");
    argv.insert(argv.end(), files.begin(), files.end());
  }
  for (const std::string& a : {std::string("--script"), script, std::string("--disk-mb"),
                               std::string("16"), std::string("--timeout"),
                               std::to_string(timeout_s), std::string("--lba-size"),
                               std::to_string(lba_size), std::string("--out"), out}) {
    argv.push_back(a);
  }
  return Run(argv, timeout_s + 20);
}

#endif

}  // namespace iotwin::test
