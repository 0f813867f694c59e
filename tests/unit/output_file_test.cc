// OutputFile (base/output_file.h): outputs go to a private temporary renamed over the name, so a
// file or a link found at the name is replaced, never written through; FIFOs are written in
// place. Symlinks planted by another user need root to make: tests/runtime/output_files_test.cc.
#include "base/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace iotwin {
namespace {

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/iotwin-output-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static std::string Read(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  static void Write(const std::string& p, const std::string& text) {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
  }
  // Names in the directory (temporaries included).
  size_t Entries() const {
    size_t n = 0;
    for (auto it = std::filesystem::directory_iterator(dir_); it != std::filesystem::end(it); ++it) {
      n++;
    }
    return n;
  }

  std::string dir_;
};

TEST_F(OutputFileTest, WritesUnderATemporaryNameUntilCommitted) {
  const std::string name = dir_ + "/out.txt";
  auto out = OutputFile::Create(name);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_TRUE(out->Write("hello").ok());
  EXPECT_FALSE(std::filesystem::exists(name));  // nothing that looks whole at the name yet
  EXPECT_NE(out->written_path(), name);
  ASSERT_TRUE(out->Commit().ok());
  EXPECT_EQ(Read(name), "hello");
  EXPECT_EQ(Entries(), 1u);
}

TEST_F(OutputFileTest, AnUncommittedOutputLeavesNothing) {
  const std::string name = dir_ + "/out.txt";
  Write(name, "previous");
  {
    auto out = OutputFile::Create(name);
    ASSERT_TRUE(out.ok());
    ASSERT_TRUE(out->Write("half").ok());
  }
  EXPECT_EQ(Read(name), "previous");
  EXPECT_EQ(Entries(), 1u);
}

TEST_F(OutputFileTest, AHardLinkAtTheNameIsReplacedNotWrittenThrough) {
  const std::string victim = dir_ + "/victim", name = dir_ + "/out.txt";
  Write(victim, "precious");
  ASSERT_EQ(::link(victim.c_str(), name.c_str()), 0);
  auto out = OutputFile::Create(name);
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(out->Write("output").ok());
  ASSERT_TRUE(out->Commit().ok());
  EXPECT_EQ(Read(victim), "precious");
  EXPECT_EQ(Read(name), "output");
}

TEST_F(OutputFileTest, APlantedTemporaryNameIsNeverWrittenThrough) {
  // Whoever guesses the first temporary name and plants a link there gets skipped.
  const std::string victim = dir_ + "/victim", name = dir_ + "/out.txt";
  Write(victim, "precious");
  const std::string guess = dir_ + "/.out.txt.partial-" + std::to_string(::getpid()) + "-0";
  ASSERT_EQ(::symlink(victim.c_str(), guess.c_str()), 0);
  auto out = OutputFile::Create(name);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_NE(out->written_path(), guess);
  ASSERT_TRUE(out->Write("output").ok());
  ASSERT_TRUE(out->Commit().ok());
  EXPECT_EQ(Read(victim), "precious");
  EXPECT_EQ(Read(name), "output");
}

TEST_F(OutputFileTest, AFifoIsWrittenInPlace) {
  const std::string fifo = dir_ + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = Read(fifo); });
  {
    auto out = OutputFile::Create(fifo);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_TRUE(out->in_place());
    ASSERT_TRUE(out->Write("through the pipe").ok());
    ASSERT_TRUE(out->Commit().ok());
  }
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  struct stat st;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST_F(OutputFileTest, OwnDescriptorIsWrittenInPlace) {
  const std::string name = dir_ + "/stdout-like";
  Write(name, "old contents that are longer");
  const int fd = ::open(name.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  {
    auto out = OutputFile::Create("/proc/self/fd/" + std::to_string(fd));
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_TRUE(out->in_place());
    ASSERT_TRUE(out->Write("new").ok());
    ASSERT_TRUE(out->Commit().ok());
  }
  ::close(fd);
  EXPECT_EQ(Read(name), "new");
}

TEST_F(OutputFileTest, APublishedFileIsAtItsNameWhileWritten) {
  const std::string victim = dir_ + "/victim", name = dir_ + "/trace";
  Write(victim, "precious");
  ASSERT_EQ(::link(victim.c_str(), name.c_str()), 0);
  {
    auto out = OutputFile::Create(name);
    ASSERT_TRUE(out.ok());
    ASSERT_TRUE(out->Write("head").ok());
    ASSERT_TRUE(out->Publish().ok());
    EXPECT_EQ(Read(name), "head");  // replaced, not written through
    ASSERT_TRUE(out->Write(" and tail").ok());
    ASSERT_TRUE(out->Commit().ok());
  }
  EXPECT_EQ(Read(name), "head and tail");
  EXPECT_EQ(Read(victim), "precious");
  {
    auto out = OutputFile::Create(name);
    ASSERT_TRUE(out.ok());
    ASSERT_TRUE(out->Publish().ok());
  }  // discarded: the published file goes too
  EXPECT_FALSE(std::filesystem::exists(name));
  EXPECT_EQ(Entries(), 1u);
}

TEST_F(OutputFileTest, ADirectoryIsRefused) {
  auto out = OutputFile::Create(dir_);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("is a directory"), std::string::npos)
      << out.status().ToString();
}

}  // namespace
}  // namespace iotwin
