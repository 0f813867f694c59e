// Helpers of the block-layer runtime tests: an ext4 file system on a loop device (always torn
// down, even when a test fails halfway), and `iotwin record` + `iotwin layers --json` of a test
// program.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime_util.h"

namespace iotwin::test {

// A loop device over a sparse file under /var/tmp of `bytes`, or over an existing path (another
// loop device, say); with `direct_io`, the loop driver reads and writes its backing file with
// O_DIRECT. The destructor unmounts what Mount() mounted, detaches the device and removes the
// file, even when a test fails halfway.
class RawLoop {
 public:
  explicit RawLoop(uint64_t bytes, bool direct_io = false) {
    char tmpl[] = "/var/tmp/iotwin-loop-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd < 0) return;
    image_ = tmpl;
    const bool sized = ftruncate(fd, static_cast<off_t>(bytes)) == 0;
    close(fd);
    if (sized) Attach(image_, direct_io);
  }
  RawLoop(const std::string& backing, bool direct_io) { Attach(backing, direct_io); }
  ~RawLoop() {
    if (!mount_.empty()) {
      Run({"/usr/bin/umount", mount_}, 30);
      rmdir(mount_.c_str());
    }
    if (!dev_.empty()) Run({"/usr/sbin/losetup", "-d", dev_}, 30);
    if (!image_.empty()) unlink(image_.c_str());
  }
  RawLoop(const RawLoop&) = delete;
  RawLoop& operator=(const RawLoop&) = delete;

  const std::string& dev() const { return dev_; }      // "" when the set-up failed
  const std::string& image() const { return image_; }  // "" over an existing path
  std::string name() const { return dev_.substr(dev_.rfind('/') + 1); }
  // "7:3", from sysfs.
  std::string MajorMinor() const {
    std::ifstream in("/sys/block/" + name() + "/dev");
    std::string mm;
    in >> mm;
    return mm;
  }
  // Formats the device ext4 and mounts it on a new directory under /var/tmp; its path, or "".
  std::string Mount() {
    if (Run({"/usr/sbin/mkfs.ext4", "-q", "-F", dev_}, 60).exit_code != 0) return "";
    char tmpl[] = "/var/tmp/iotwin-mnt-XXXXXX";
    if (!mkdtemp(tmpl)) return "";
    if (Run({"/usr/bin/mount", dev_, tmpl}, 30).exit_code != 0) {
      rmdir(tmpl);
      return "";
    }
    mount_ = tmpl;
    return mount_;
  }
  // True while every byte of the backing file is zero (nothing was written).
  bool Untouched() const {
    std::ifstream in(image_, std::ios::binary);
    char buf[1 << 16];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
      for (std::streamsize i = 0; i < in.gcount(); i++) {
        if (buf[i] != 0) return false;
      }
    }
    return true;
  }

 private:
  void Attach(const std::string& backing, bool direct_io) {
    std::vector<std::string> argv = {"/usr/sbin/losetup", "-f", "--show"};
    if (direct_io) argv.push_back("--direct-io=on");
    argv.push_back(backing);
    RunResult r = Run(argv, 30);
    if (r.exit_code == 0) dev_ = r.out.substr(0, r.out.find('\n'));
  }

  std::string image_, dev_, mount_;
};

// A sparse image under /var/tmp on a free loop device, formatted ext4 and mounted on a
// temporary directory. The destructor unmounts, detaches and removes whatever was set up.
class LoopFs {
 public:
  explicit LoopFs(int size_mb = 160) {
    char image[] = "/var/tmp/iotwin-blk-XXXXXX";
    int fd = mkstemp(image);
    if (fd < 0) {
      error_ = "mkstemp under /var/tmp failed";
      return;
    }
    close(fd);
    image_ = image;
    if (truncate(image_.c_str(), static_cast<off_t>(size_mb) << 20) != 0) {
      error_ = "truncate " + image_ + " failed";
      return;
    }
    RunResult r = Run({"/sbin/losetup", "-f", "--show", image_}, 30);
    if (r.exit_code != 0) {
      error_ = "losetup: " + r.err;
      return;
    }
    dev_ = r.out.substr(0, r.out.find('\n'));
    r = Run({"/sbin/mkfs.ext4", "-q", "-F", dev_}, 60);
    if (r.exit_code != 0) {
      error_ = "mkfs.ext4: " + r.err;
      return;
    }
    mnt_ = std::make_unique<TempDir>();
    r = Run({"/bin/mount", dev_, mnt_->path()}, 30);
    if (r.exit_code != 0) {
      error_ = "mount: " + r.err;
      return;
    }
    mounted_ = true;
  }
  ~LoopFs() {
    if (mounted_) {
      Run({"/bin/umount", mnt_->path()}, 60);
      // a busy mount (a test program still running) is detached lazily rather than leaked
      Run({"/bin/umount", "-l", mnt_->path()}, 30);
    }
    if (!dev_.empty()) Run({"/sbin/losetup", "-d", dev_}, 30);
    if (!image_.empty()) unlink(image_.c_str());
  }
  LoopFs(const LoopFs&) = delete;
  LoopFs& operator=(const LoopFs&) = delete;

  bool ok() const { return mounted_; }
  const std::string& error() const { return error_; }
  const std::string& dev() const { return dev_; }
  std::string name() const { return dev_.substr(dev_.rfind('/') + 1); }
  std::string path(const std::string& file) const { return mnt_->path() + "/" + file; }
  uint32_t QueueLimit(const std::string& what) const {
    std::ifstream in("/sys/block/" + name() + "/queue/" + what);
    uint32_t v = 0;
    in >> v;
    return v;
  }

 private:
  std::string image_, dev_, error_;
  std::unique_ptr<TempDir> mnt_;
  bool mounted_ = false;
};

struct LayersRun {
  RunResult record, layers;
  nlohmann::json report;  // `iotwin layers --json --all-requests`
  std::string trace;
};

// Records PROG LOG ARGS... and builds its layers report.
inline LayersRun RecordLayers(const TempDir& dir, const std::string& prog,
                              const std::vector<std::string>& args,
                              const std::vector<std::string>& record_options = {}) {
  LayersRun r;
  r.trace = dir / "trace.iotwin";
  std::vector<std::string> argv = {IotwinBin(), "record", "-o", r.trace, "--no-status"};
  argv.insert(argv.end(), record_options.begin(), record_options.end());
  argv.push_back("--");
  argv.push_back(TestProg(prog));
  argv.push_back(dir / "calls.log");
  argv.insert(argv.end(), args.begin(), args.end());
  r.record = Run(argv, 180);
  r.layers = Run({IotwinBin(), "layers", "--json", "--all-requests", r.trace}, 180);
  if (r.layers.exit_code == 0) {
    r.report = nlohmann::json::parse(r.layers.out, nullptr, /*allow_exceptions=*/false);
  }
  return r;
}

// Every request of the report is either linked to a cause or marked unattributed with a reason.
inline void ExpectEveryRequestAccountedFor(const nlohmann::json& report) {
  const auto& cov = report["coverage"];
  uint64_t requests = cov["requests"].get<uint64_t>();
  EXPECT_EQ(cov["linked"].get<uint64_t>() + cov["unattributed"].get<uint64_t>(), requests);
  EXPECT_EQ(report["requests"].size(), requests);
  uint64_t unattributed = 0;
  for (const auto& q : report["requests"]) {
    ASSERT_TRUE(q.contains("cause")) << q.dump();
    if (q["cause"] == "unattributed") {
      unattributed++;
      EXPECT_TRUE(q.contains("why") && !q["why"].get<std::string>().empty()) << q.dump();
    }
  }
  EXPECT_EQ(unattributed, cov["unattributed"].get<uint64_t>());
  std::cout << "[ coverage ] " << requests << " requests, " << cov["linked"] << " linked, "
            << unattributed << " unattributed: " << cov["unattributed_reasons"].dump() << "\n";
}

}  // namespace iotwin::test
