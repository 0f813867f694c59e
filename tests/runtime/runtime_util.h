// Helpers for runtime tests: run real binaries, temporary directories, root/BPF gating.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../unit/temp_dir.h"  // TempDir

namespace iotwin::test {

struct RunResult {
  int exit_code = -1;  // exit status, or 128+signal when killed
  std::string out;
  std::string err;
};

// Runs argv[0] (a path) with arguments, capturing stdout and stderr; `timeout_s` kills it.
RunResult Run(const std::vector<std::string>& argv, int timeout_s = 120,
              const std::vector<std::string>& extra_env = {});

// True when this process can load BPF programs (root with CAP_BPF/CAP_SYS_ADMIN).
bool CanLoadBpf();
// IOTWIN_REQUIRE_BPF=1 in the environment: a test that cannot load BPF must fail, not skip.
bool BpfRequired();

std::string IotwinBin();
std::string WorkloadBin();
std::string TestProg(const std::string& name);

}  // namespace iotwin::test

// Skips the test when BPF cannot be loaded, or fails it when IOTWIN_REQUIRE_BPF=1.
#define IOTWIN_REQUIRE_BPF_OR_SKIP()                                                   \
  do {                                                                                 \
    if (!::iotwin::test::CanLoadBpf()) {                                               \
      if (::iotwin::test::BpfRequired()) FAIL() << "BPF unavailable and IOTWIN_REQUIRE_BPF=1"; \
      GTEST_SKIP() << "needs root and BPF";                                            \
    }                                                                                  \
  } while (0)
