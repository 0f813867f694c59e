// `iotwin check` against the real kernel: the JSON is complete and, as root, matches what is
// verified about our machines (tp_btf and ring buffers work; fentry and the PMU do not).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "runtime_util.h"

namespace iotwin::test {
namespace {

const char* const kFeatureKeys[] = {
    "privileges",          "btf",
    "tracefs_mounted",     "tracefs_mountable",
    "raw_syscalls",        "syscall_tracepoints",
    "tp_btf",              "raw_tp",
    "fentry",              "kprobes",
    "uprobes",             "ringbuf",
    "bpf_find_vma",        "kfunc_rdonly_cast",
    "block_tracepoints",
    "nvme_tracepoints",    "io_uring_tracepoints",
    "filemap_tracepoints", "writeback_tracepoints",
    "page_fault_tracepoint", "sched_tracepoints",
    "irq_tracepoints",     "cachestat",
    "hardware_pmu",        "nvme_lba_sizes",
};

nlohmann::json CheckJson(const std::vector<std::string>& env = {}) {
  RunResult r = test::Run({IotwinBin(), "check", "--json"}, 60, env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON:\n" << r.out;
  return j;
}

TEST(CheckCommand, JsonHasEveryFeatureWithReasons) {
  nlohmann::json j = CheckJson();
  ASSERT_TRUE(j.is_object());
  for (const char* key : {"kernel", "euid", "tracefs", "kernel_config", "features", "layers",
                          "lba_sizes"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  ASSERT_TRUE(j["features"].is_object());
  EXPECT_EQ(j["features"].size(), std::size(kFeatureKeys));
  for (const char* key : kFeatureKeys) {
    ASSERT_TRUE(j["features"].contains(key)) << key;
    const auto& f = j["features"][key];
    EXPECT_TRUE(f["supported"].is_boolean()) << key;
    for (const char* field : {"title", "detail", "needed_by", "fallback"}) {
      ASSERT_TRUE(f[field].is_string()) << key << "." << field;
    }
    // Every "no" says why.
    if (!f["supported"].get<bool>()) {
      EXPECT_FALSE(f["detail"].get<std::string>().empty()) << key;
    }
  }
  for (const char* layer : {"syscall", "memory", "block", "nvme", "sched"}) {
    ASSERT_TRUE(j["layers"].contains(layer)) << layer;
    EXPECT_TRUE(j["layers"][layer]["available"].is_boolean()) << layer;
  }
  EXPECT_FALSE(j["kernel"]["release"].get<std::string>().empty());
}

TEST(CheckCommand, HumanTableListsEveryFeature) {
  RunResult r = test::Run({IotwinBin(), "check"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("FEATURE"), std::string::npos);
  for (const char* key : kFeatureKeys) {
    EXPECT_NE(r.out.find(std::string("\n") + key + " "), std::string::npos) << key << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("features supported"), std::string::npos);
}

TEST(CheckCommand, VerifiedFactsOfOurMachines) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  nlohmann::json j = CheckJson();
  ASSERT_TRUE(j.contains("features"));
  const auto& f = j["features"];
  EXPECT_TRUE(f["privileges"]["supported"].get<bool>()) << f["privileges"]["detail"];
  EXPECT_TRUE(f["btf"]["supported"].get<bool>()) << f["btf"]["detail"];
  EXPECT_TRUE(f["tp_btf"]["supported"].get<bool>()) << f["tp_btf"]["detail"];
  EXPECT_TRUE(f["raw_tp"]["supported"].get<bool>()) << f["raw_tp"]["detail"];
  EXPECT_TRUE(f["ringbuf"]["supported"].get<bool>()) << f["ringbuf"]["detail"];
  EXPECT_TRUE(f["raw_syscalls"]["supported"].get<bool>()) << f["raw_syscalls"]["detail"];
  EXPECT_TRUE(f["block_tracepoints"]["supported"].get<bool>()) << f["block_tracepoints"]["detail"];

  // Unsupported here, each with the errno of the failed attempt.
  EXPECT_FALSE(f["fentry"]["supported"].get<bool>());
  EXPECT_TRUE(f["fentry"].contains("errno_name")) << f["fentry"];
  EXPECT_NE(f["fentry"]["detail"].get<std::string>().find(f["fentry"].value("errno_name", "?")),
            std::string::npos);
  EXPECT_FALSE(f["hardware_pmu"]["supported"].get<bool>());
  EXPECT_TRUE(f["hardware_pmu"].contains("errno_name")) << f["hardware_pmu"];
  EXPECT_NE(f["hardware_pmu"]["detail"].get<std::string>().find("unavailable"), std::string::npos);

  EXPECT_TRUE(j["layers"]["syscall"]["available"].get<bool>()) << j["layers"]["syscall"];
  EXPECT_NE(j["layers"]["syscall"]["method"].get<std::string>().find("tp_btf"), std::string::npos);

  // bpf_rdonly_cast came with 6.2 (this machine runs 6.18; Debian 12's 6.1 lacks it): with it
  // record loads the fast syscall object, without it the compat one.
  std::string release = j["kernel"]["release"].get<std::string>();
  int major = 0, minor = 0;
  bool parsed = sscanf(release.c_str(), "%d.%d", &major, &minor) == 2;
  bool kfunc = f["kfunc_rdonly_cast"]["supported"].get<bool>();
  if (parsed && (major > 6 || (major == 6 && minor >= 2))) {
    EXPECT_TRUE(kfunc) << release << " " << f["kfunc_rdonly_cast"];
  }
  std::string reason = j["layers"]["syscall"]["reason"].get<std::string>();
  if (getenv("IOTWIN_BPF_COMPAT") == nullptr) {
    EXPECT_NE(reason.find(kfunc ? "fast syscall object" : "compat syscall object"),
              std::string::npos)
        << reason;
  }
}

// IOTWIN_BPF_COMPAT=1 forces the compat syscall object, and check says so.
TEST(CheckCommand, SaysWhenTheCompatSyscallObjectIsForced) {
  nlohmann::json j = CheckJson({"IOTWIN_BPF_COMPAT=1"});
  ASSERT_TRUE(j.contains("layers"));
  std::string reason = j["layers"]["syscall"]["reason"].get<std::string>();
  EXPECT_NE(reason.find("compat syscall object"), std::string::npos) << reason;
  EXPECT_NE(reason.find("IOTWIN_BPF_COMPAT"), std::string::npos) << reason;
}

// Probing mounts tracefs only in a private mount namespace: the host's mount table is unchanged.
TEST(CheckCommand, LeavesHostMountsAlone) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  auto mounts = [] {
    std::ifstream in("/proc/self/mounts");
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  std::string before = mounts();
  nlohmann::json j = CheckJson();
  EXPECT_EQ(mounts(), before);
  // Either it was mounted already, or mounting was tried (and on our machines it works).
  ASSERT_TRUE(j.contains("features"));
  EXPECT_TRUE(j["features"]["tracefs_mountable"]["supported"].get<bool>())
      << j["features"]["tracefs_mountable"];
}

}  // namespace
}  // namespace iotwin::test
