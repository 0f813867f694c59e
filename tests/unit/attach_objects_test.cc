// The attach table against the BPF objects the build made: every row's program exists in its
// object with the section of each method the row offers (tp_btf/, raw_tp/, tp/), and every
// tracepoint program of the objects is in the table (as a row or a variant of one), so the
// table `iotwin check` prints cannot drift from what the capture loads. Opening an object needs
// no privileges (nothing is loaded into the kernel).
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <string>

#include "capture/attach_table.h"

namespace iotwin::capture {
namespace {

namespace fs = std::filesystem;

// build/bpf/, next to the test binary's build/tests/.
fs::path BpfObjectDir() {
  char self[PATH_MAX] = "";
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return {};
  return fs::path(std::string(self, static_cast<size_t>(n))).parent_path().parent_path() / "bpf";
}

struct ObjectCloser {
  void operator()(bpf_object* o) const { bpf_object__close(o); }
};
using ObjectPtr = std::unique_ptr<bpf_object, ObjectCloser>;

std::string_view SectionPrefix(AttachMethod m) {
  switch (m) {
    case AttachMethod::kTpBtf:
      return "tp_btf/";
    case AttachMethod::kRawTp:
      return "raw_tp/";
    case AttachMethod::kTracepoint:
      return "tp/";
    case AttachMethod::kNone:
      break;
  }
  return "?";
}

// Sibling programs that share a row's method: the exit program for kernels whose
// sched_process_exit has no group_dead argument.
bool IsSiblingOf(std::string_view name, std::string_view base) {
  return base == "iot_proc_exit" && name.starts_with("iot_proc_exit_legacy");
}

TEST(AttachObjects, TableAndObjectsAgree) {
  fs::path dir = BpfObjectDir();
  if (!fs::exists(dir / "syscall.bpf.o")) {
    GTEST_SKIP() << "no BPF objects in " << dir << " (built with IOTWIN_BUILD_BPF=OFF)";
  }
  std::vector<std::string> objects;
  for (const ProgramAttach& row : AttachTable()) {
    if (std::find(objects.begin(), objects.end(), row.object) == objects.end()) {
      objects.emplace_back(row.object);
    }
  }
  objects.emplace_back("syscall_compat");  // the same source as syscall, built again
  for (const std::string& object : objects) {
    std::string table_object = object == "syscall_compat" ? "syscall" : object;
    fs::path path = dir / (object + ".bpf.o");
    ObjectPtr obj(bpf_object__open_file(path.c_str(), nullptr));
    ASSERT_TRUE(obj) << "cannot open " << path;
    for (const ProgramAttach& row : AttachTable()) {
      if (row.object != table_object) continue;
      for (AttachMethod m : row.methods) {
        if (m == AttachMethod::kNone) break;
        std::string name = ProgramVariant(row.program, m);
        bpf_program* prog = bpf_object__find_program_by_name(obj.get(), name.c_str());
        ASSERT_NE(prog, nullptr) << object << " has no " << name;
        std::string_view section = bpf_program__section_name(prog);
        EXPECT_TRUE(section.starts_with(SectionPrefix(m))) << name << " in " << section;
        EXPECT_TRUE(section.ends_with(row.event())) << name << " in " << section;
      }
    }
    bpf_program* prog = nullptr;
    bpf_object__for_each_program(prog, obj.get()) {
      std::string_view section = bpf_program__section_name(prog);
      if (!section.starts_with("tp_btf/") && !section.starts_with("raw_tp/") &&
          !section.starts_with("tp/")) {
        continue;  // uprobes are attached by user space per --uprobe, not from the table
      }
      std::string_view name = bpf_program__name(prog);
      bool listed = false;
      for (const ProgramAttach& row : AttachTable()) {
        if (row.object != table_object) continue;
        for (AttachMethod m : row.methods) {
          if (m == AttachMethod::kNone) break;
          if (name == ProgramVariant(row.program, m) || IsSiblingOf(name, row.program)) {
            listed = true;
          }
        }
      }
      EXPECT_TRUE(listed) << object << ": " << name << " (" << section
                          << ") is not in the attach table";
    }
  }
}

}  // namespace
}  // namespace iotwin::capture
