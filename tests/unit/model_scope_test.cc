// The data scope (model/scope.h): glob matching on bytes, the `data` preset, option parsing.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "model/path.h"
#include "model/scope.h"

namespace iotwin::model {
namespace {

TEST(ScopeGlob, StarAndQuestionMarkCrossSlashes) {
  EXPECT_TRUE(GlobMatch("/data/*", "/data/a"));
  EXPECT_TRUE(GlobMatch("/data/*", "/data/sub/dir/a.bin"));
  EXPECT_FALSE(GlobMatch("/data/*", "/data"));
  EXPECT_FALSE(GlobMatch("/data/*", "/database/a"));
  EXPECT_TRUE(GlobMatch("*.bin", "/x/y.bin"));
  EXPECT_TRUE(GlobMatch("/a?b", "/a/b"));
  EXPECT_FALSE(GlobMatch("/a?b", "/ab"));
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_TRUE(GlobMatch("/**x", "/x"));
  EXPECT_FALSE(GlobMatch("/x*y", "/x"));
}

TEST(ScopeGlob, BracketsEscapesAndClasses) {
  EXPECT_TRUE(GlobMatch("/f[0-9]", "/f7"));
  EXPECT_FALSE(GlobMatch("/f[0-9]", "/fa"));
  EXPECT_TRUE(GlobMatch("/f[!0-9]", "/fa"));
  EXPECT_TRUE(GlobMatch("/f[^0-9]", "/fa"));
  EXPECT_TRUE(GlobMatch("/f[]]", "/f]"));
  EXPECT_TRUE(GlobMatch("/f[[:digit:]x]", "/fx"));
  EXPECT_TRUE(GlobMatch("/f[[:digit:]x]", "/f3"));
  EXPECT_FALSE(GlobMatch("/f[[:upper:]]", "/fa"));
  EXPECT_TRUE(GlobMatch("/a\\*b", "/a*b"));
  EXPECT_FALSE(GlobMatch("/a\\*b", "/aXb"));
  // An unterminated bracket is an ordinary '[', as fnmatch takes it.
  EXPECT_TRUE(GlobMatch("/a[b", "/a[b"));
}

TEST(ScopeGlob, NamesAreBytes) {
  // Not UTF-8: matched byte for byte, '?' takes one byte.
  const std::string name = std::string("/d/\xff\xfe.bin");
  EXPECT_TRUE(GlobMatch("/d/*.bin", name));
  EXPECT_TRUE(GlobMatch("/d/??.bin", name));
  EXPECT_TRUE(GlobMatch(std::string("/d/\xff*"), name));
  // A NUL byte in a name is a byte like any other (fnmatch would stop at it).
  const std::string with_nul("/d/a\0b", 6);
  EXPECT_TRUE(GlobMatch("/d/a?b", with_nul));
  EXPECT_FALSE(GlobMatch("/d/a", with_nul));
}

TEST(ScopeGlob, BacktrackingStaysPolynomial) {
  // Many stars against a long non-matching name: a naive recursive matcher takes exponential
  // time here; the single-resume matcher finishes at once.
  const std::string text(4000, 'a');
  EXPECT_FALSE(GlobMatch("*a*a*a*a*a*a*a*a*a*a*b", text));
}

TEST(ScopeGlob, CheckGlobRejectsPatternsThatCannotMatchOrAreMalformed) {
  EXPECT_TRUE(CheckGlob("--include", "/data/*").ok());
  EXPECT_TRUE(CheckGlob("--include", "*.bin").ok());
  EXPECT_TRUE(CheckGlob("--include", "[/]data").ok());
  Status relative = CheckGlob("--include", "data/*");
  ASSERT_FALSE(relative.ok());
  EXPECT_NE(relative.message().find("absolute"), std::string::npos) << relative.message();
  EXPECT_NE(relative.message().find("*/data/*"), std::string::npos) << relative.message();
  EXPECT_FALSE(CheckGlob("--exclude", "").ok());
  Status bracket = CheckGlob("--exclude", "/a[b");
  ASSERT_FALSE(bracket.ok());
  EXPECT_NE(bracket.message().find("--exclude /a[b"), std::string::npos) << bracket.message();
  EXPECT_FALSE(CheckGlob("--exclude", "/a[[:nope:]]").ok());
  EXPECT_FALSE(CheckGlob("--exclude", "/a\\").ok());
}

TEST(ScopeDataPreset, LeavesOutWhatAProgramLoadsToRun) {
  const FileKind s = FileKind::kStorage;
  EXPECT_EQ(DataPresetExcludes("/etc/ld.so.cache", s), DataExclusion::kLoader);
  EXPECT_EQ(DataPresetExcludes("/etc/ld.so.preload", s), DataExclusion::kLoader);
  EXPECT_EQ(DataPresetExcludes("/etc/ld.so.conf.d/x86_64.conf", s), DataExclusion::kLoader);
  EXPECT_EQ(DataPresetExcludes("/lib64/ld-linux-x86-64.so.2", s), DataExclusion::kLibrary);
  EXPECT_EQ(DataPresetExcludes("/usr/lib/x86_64-linux-gnu/libc.so.6", s), DataExclusion::kLibrary);
  EXPECT_EQ(DataPresetExcludes("/opt/app/libfoo.so", s), DataExclusion::kLibrary);
  EXPECT_EQ(DataPresetExcludes("/usr/lib/python3.11/os.py", s), DataExclusion::kInterpreter);
  EXPECT_EQ(DataPresetExcludes("/usr/lib/python3/dist-packages/numpy/__init__.py", s),
            DataExclusion::kInterpreter);
  EXPECT_EQ(DataPresetExcludes("/home/u/venv/lib/python3.12/site-packages/torch/nn.py", s),
            DataExclusion::kInterpreter);
  EXPECT_EQ(DataPresetExcludes("/home/u/proj/__pycache__/train.cpython-311.pyc", s),
            DataExclusion::kInterpreter);
  EXPECT_EQ(DataPresetExcludes("/home/u/proj/__pycache__", s), DataExclusion::kInterpreter);
  EXPECT_EQ(DataPresetExcludes("/usr/lib/locale/locale-archive", s), DataExclusion::kLocale);
  EXPECT_EQ(DataPresetExcludes("/usr/share/locale/de/LC_MESSAGES/tar.mo", s),
            DataExclusion::kLocale);
  EXPECT_EQ(DataPresetExcludes("/usr/lib/x86_64-linux-gnu/gconv/gconv-modules.cache", s),
            DataExclusion::kLocale);
  EXPECT_EQ(DataPresetExcludes("/etc/localtime", s), DataExclusion::kLocale);
  EXPECT_EQ(DataPresetExcludes("/usr/bin/bash", s), DataExclusion::kProgram);
  EXPECT_EQ(DataPresetExcludes("/root/.pyenv/versions/3.11.7/bin/python3.11", s),
            DataExclusion::kInterpreter);
  EXPECT_EQ(DataPresetExcludes("/opt/conda/envs/ml/lib/python3.12/site-packages/certifi/x.pem", s),
            DataExclusion::kInterpreter);
  EXPECT_EQ(DataExclusionName(DataExclusion::kLibrary), "library");
}

TEST(ScopeDataPreset, KeepsDataFiles) {
  const FileKind s = FileKind::kStorage;
  EXPECT_EQ(DataPresetExcludes("/data/shard-00.safetensors", s), DataExclusion::kNone);
  EXPECT_EQ(DataPresetExcludes("/home/u/proj/train.py", s), DataExclusion::kNone);
  EXPECT_EQ(DataPresetExcludes("/home/u/proj/data/db.sqlite", s), DataExclusion::kNone);
  EXPECT_EQ(DataPresetExcludes("/usr/library/x.bin", s), DataExclusion::kNone);
  EXPECT_EQ(DataPresetExcludes("/data/solo.bin", s), DataExclusion::kNone);
  EXPECT_EQ(DataPresetExcludes("/data/model.sod", s), DataExclusion::kNone);
  EXPECT_EQ(DataPresetExcludes("/etc/ld.so.confusing-data", s), DataExclusion::kLoader);
  // A block device is storage, wherever its node is.
  EXPECT_EQ(DataPresetExcludes("/dev/nvme0n1", ClassifyFile(6, "/dev/nvme0n1", true)),
            DataExclusion::kNone);
  // A path that is not known: only its kind decides.
  EXPECT_EQ(DataPresetExcludes("", s), DataExclusion::kNone);
}

TEST(ScopeDataPreset, WhatIsNotStorageByClassifyFile) {
  const std::pair<uint16_t, const char*> files[] = {
      {8, "/proc/self/maps"}, {8, "/sys/kernel/mm/transparent_hugepage/enabled"},
      {2, "/dev/null"},       {1, ""},
      {12, ""},               {0, ""}};
  for (auto [ftype, path] : files) {
    EXPECT_EQ(DataPresetExcludes(path, ClassifyFile(ftype, path, true)), DataExclusion::kNotStorage)
        << ftype << " " << path;
  }
}

TEST(Scope, AllAdmitsEverything) {
  Scope all;
  EXPECT_TRUE(all.IsAll());
  EXPECT_TRUE(all.Admits("/proc/self/maps", FileKind::kPseudoFs));
  EXPECT_TRUE(all.Admits("", FileKind::kPipe));
  EXPECT_EQ(all.Describe(), "all files");
}

TEST(Scope, IncludeExcludeAndPresetCombine) {
  auto s = Scope::Parse("data", {"/data/*", "*.ckpt"}, {"*.tmp"});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_FALSE(s->IsAll());
  EXPECT_TRUE(s->Admits("/data/a.bin", FileKind::kStorage));
  EXPECT_TRUE(s->Admits("/ckpt/step1.ckpt", FileKind::kStorage));
  EXPECT_FALSE(s->Admits("/other/a.bin", FileKind::kStorage));   // no include matches
  EXPECT_FALSE(s->Admits("/data/a.tmp", FileKind::kStorage));    // excluded
  EXPECT_FALSE(s->Admits("/data/libx.so", FileKind::kStorage));  // the preset
  EXPECT_FALSE(s->Admits("", FileKind::kStorage));  // includes need a known path
  const std::string d = s->Describe();
  EXPECT_NE(d.find("data:"), std::string::npos) << d;
  EXPECT_NE(d.find("only paths matching /data/*, *.ckpt"), std::string::npos) << d;
  EXPECT_NE(d.find("left out paths matching *.tmp"), std::string::npos) << d;
  EXPECT_EQ(d.find('\n'), std::string::npos);
  const nlohmann::json j = s->ToJson();
  EXPECT_EQ(j["preset"], "data");
  EXPECT_EQ(j["include"].size(), 2u);
  EXPECT_EQ(j["description"], d);
}

TEST(Scope, PathAndKindVerdictsCompose) {
  auto s = Scope::Parse("data", {}, {});
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->AdmitsPath("/proc/self/maps"));  // paths alone: not in the preset's lists
  EXPECT_FALSE(s->AdmitsKind(FileKind::kPseudoFs));
  EXPECT_FALSE(s->Admits("/proc/self/maps", FileKind::kPseudoFs));
  EXPECT_FALSE(s->AdmitsPath("/usr/lib/x86_64-linux-gnu/libm.so.6"));
  EXPECT_TRUE(s->AdmitsKind(FileKind::kStorage));
  EXPECT_TRUE(Scope().AdmitsKind(FileKind::kPipe));
}

TEST(Scope, ExcludeAloneKeepsFilesWithoutAPath) {
  auto s = Scope::Parse("all", {}, {"/usr/*"});
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->Admits("", FileKind::kStorage));
  EXPECT_FALSE(s->Admits("/usr/lib/x", FileKind::kStorage));
  EXPECT_TRUE(s->Admits("/proc/x", FileKind::kPseudoFs));  // no preset: kinds are not judged
}

TEST(Scope, ParseErrorsNameTheOptionAndValue) {
  auto preset = Scope::Parse("dat", {}, {});
  ASSERT_FALSE(preset.ok());
  EXPECT_NE(preset.status().message().find("--scope dat: expected data"), std::string::npos)
      << preset.status().message();
  auto include = Scope::Parse("", {"data/*"}, {});
  ASSERT_FALSE(include.ok());
  EXPECT_NE(include.status().message().find("--include data/*"), std::string::npos);
  auto exclude = Scope::Parse("", {}, {"/x[y"});
  ASSERT_FALSE(exclude.ok());
  EXPECT_NE(exclude.status().message().find("--exclude /x[y"), std::string::npos);
  EXPECT_TRUE(Scope::Parse("", {}, {})->IsAll());
}

}  // namespace
}  // namespace iotwin::model
