// Anonymizer: the output keeps the trace's structure (records, ops, offsets, file identity,
// directory structure) and holds none of the original names, not even in the compressed chunks.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cstring>
#include <set>

#include <gtest/gtest.h>

#include "format/record_packing.h"
#include "format/records.h"
#include "interop/anonymize.h"
#include "interop_test_util.h"

namespace iotwin::interop {
namespace {

using testing::ReadFile;
using testing::ScratchDir;
using ::iotwin::test::TraceBuilder;

const std::vector<std::string> kSecrets = {
    "medical", "patient", "alice", "bobby", "fraud-detector", "acmecorp", "scorer", "records",
    "score batch", "hostsecret"};

const std::vector<std::string> kPaths = {
    "/srv/medical/records/patient_alice.parquet",
    "/srv/medical/records/patient_bobby.parquet",
    "patient_alice.parquet",  // relative: same file name as above
    "/srv/medical/records",
    "/proc/self/status",
    "/dev/nvme0n1",
    "/dev/shm/acmecorp_segment",
    "/srv/medical//records/./patient_bobby.parquet/",
};

void WriteSensitiveTrace(const std::string& path, const std::vector<std::string>& paths) {
  nlohmann::json meta = {
      {"tool", "iotwin 0.1.0"},
      {"host", {{"hostname", "fraud-detector-hostsecret"}, {"kernel", "6.18.0"}, {"clock", "monotonic"}}},
      {"command", {"/opt/acmecorp/bin/scorer", "--input=/srv/medical/records", "alice"}},
      {"custom_note", "acmecorp internal"}};
  TraceBuilder b(meta);
  uint32_t exe = b.Str("/opt/acmecorp/bin/scorer");
  b.Add(b.ProcRecord(IOT_PROC_EXEC, 10, 7, 7, "scorer", exe));
  int32_t fd = 3;
  uint64_t ts = 100;
  for (const auto& p : paths) {
    auto& o = b.Call(IOT_OP_OPENAT, ts++, 7, 7, AT_FDCWD, fd);
    o.path_id = b.Str(p);
    o.ino = 1000 + (p.find("alice") != std::string::npos ? 1 : p.find("bobby") != std::string::npos ? 2 : 3);
    o.dev = 42;
    auto& r = b.Call(IOT_OP_PREAD64, ts++, 7, 8, fd, 4096);
    r.offset = ts * 4096;
    r.length = 4096;
    r.ino = o.ino;
    r.dev = 42;
  }
  {
    auto& r = b.Call(IOT_OP_RENAME, ts++, 7, 7, AT_FDCWD, 0);
    r.path_id = b.Str("/srv/medical/records/patient_alice.parquet");
    r.path2_id = b.Str("/srv/medical/records/patient_alice.parquet.old");
  }
  iot_intent in{};
  InitRecord(&in, IOT_REC_INTENT);
  in.kind = IOT_INTENT_INSTANT;
  in.ts = ts++;
  in.tgid = 7;
  in.tid = 7;
  in.label_id = b.Str("score batch alice");
  b.Add(in);
  iot_block blk = b.BlockRecord(IOT_BLK_ISSUE, ts++, 8 << 20, 0, 4096, IOT_BLKF_READ, 1, 8);
  std::memcpy(blk.comm, "scorer", 7);
  blk.ino = 1001;
  blk.ino_dev = 42;
  b.Add(blk);
  EXPECT_TRUE(b.WriteFile(path, nlohmann::json{{"stop_reason", "exited"},
                                               {"import",
                                                {{"unknown_examples", {{{"text", "alice was here"}}}},
                                                 {"lines", 3}}}})
                  .ok());
}

Anonymizer MakeAnonymizer(std::string_view key, bool keep_ext) {
  AnonymizeOptions o;
  o.keep_extensions = keep_ext;
  auto a = Anonymizer::FromKey(key, o);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return std::move(*a);
}

std::vector<std::string> Split(const std::string& p) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= p.size()) {
    size_t s = p.find('/', i);
    if (s == std::string::npos) s = p.size();
    out.push_back(p.substr(i, s - i));
    i = s + 1;
  }
  return out;
}

TEST(Anonymizer, PathsKeepStructureAndKernelPrefixes) {
  Anonymizer a = MakeAnonymizer("0123456789abcdef0123456789abcdef", false);
  std::string p1 = a.Path("/srv/medical/records/patient_alice.parquet");
  std::string p2 = a.Path("/srv/medical/records/patient_bobby.parquet");
  auto c1 = Split(p1), c2 = Split(p2);
  ASSERT_EQ(c1.size(), 5u);
  EXPECT_EQ(c1[0], "");  // root kept
  EXPECT_EQ(c1[1], c2[1]);
  EXPECT_EQ(c1[2], c2[2]);
  EXPECT_EQ(c1[3], c2[3]);
  EXPECT_NE(c1[4], c2[4]);
  EXPECT_EQ(a.Path("patient_alice.parquet"), c1[4]);  // relative names map alike
  EXPECT_EQ(c1[4].size(), Anonymizer::kTokenChars);
  EXPECT_EQ(a.Path("/proc/self/status"), "/proc/self/status");
  EXPECT_EQ(a.Path("/dev/nvme0n1"), "/dev/nvme0n1");
  EXPECT_EQ(a.Path("/sys/block/nvme0n1/queue"), "/sys/block/nvme0n1/queue");
  std::string shm = a.Path("/dev/shm/acmecorp_segment");
  EXPECT_EQ(shm.substr(0, 9), "/dev/shm/");
  EXPECT_EQ(shm.find("acmecorp"), std::string::npos);
  EXPECT_EQ(a.Path("/devices/x").find("devices"), std::string::npos);  // not the /dev prefix
  EXPECT_EQ(a.Path("../a/./b/"), "../" + a.Token("a") + "/./" + a.Token("b") + "/");
  EXPECT_EQ(a.Path("/"), "/");
  EXPECT_EQ(a.Path(""), "");
  EXPECT_EQ(a.Comm("scorer"), a.Token("scorer"));
  EXPECT_LE(a.Comm("scorer").size(), 15u);

  Anonymizer ext = MakeAnonymizer("0123456789abcdef0123456789abcdef", true);
  std::string e = ext.Path("/srv/medical/records/patient_alice.parquet");
  EXPECT_EQ(e.substr(e.size() - 8), ".parquet");
  EXPECT_EQ(e.find("patient"), std::string::npos);
  EXPECT_EQ(ext.Path("/x/archive.tar.gz").substr(ext.Path("/x/archive.tar.gz").size() - 3), ".gz");
  EXPECT_EQ(ext.Path("/x/.bashrc"), "/" + ext.Token("x") + "/" + ext.Token(".bashrc"));

  // Same key, same token; another key, other tokens.
  Anonymizer again = MakeAnonymizer("0123456789abcdef0123456789abcdef", false);
  EXPECT_EQ(again.Path("/srv/medical"), a.Path("/srv/medical"));
  Anonymizer other = MakeAnonymizer("fedcba9876543210fedcba9876543210", false);
  EXPECT_NE(other.Token("medical"), a.Token("medical"));
  EXPECT_FALSE(Anonymizer::FromKey("short", {}).ok());
  EXPECT_NE(a.Inode(42, 1001), 1001u);
  EXPECT_EQ(a.Inode(42, 1001), again.Inode(42, 1001));
  EXPECT_NE(a.Inode(42, 1001), a.Inode(43, 1001));
  EXPECT_EQ(a.Inode(42, 0), 0u);
}

// Every byte of the file, plus every chunk payload decompressed.
std::string RawAndDecompressed(const std::string& path) {
  std::string file = ReadFile(path);
  std::string all = file;
  if (file.size() < 32) return all;
  uint32_t meta_len;
  std::memcpy(&meta_len, file.data() + 16, 4);
  size_t off = 32 + meta_len;
  size_t chunks = 0;
  while (off + 56 <= file.size() && std::memcmp(file.data() + off, "CHNK", 4) == 0) {
    uint32_t raw_len, comp_len;
    uint16_t codec;
    std::memcpy(&raw_len, file.data() + off + 12, 4);
    std::memcpy(&comp_len, file.data() + off + 16, 4);
    std::memcpy(&codec, file.data() + off + 20, 2);
    const char* payload = file.data() + off + 56;
    if (codec == 1 || codec == 2 || codec == 3) {
      std::string out(raw_len, '\0');
      size_t n = ZSTD_decompress(out.data(), out.size(), payload, comp_len);
      EXPECT_FALSE(ZSTD_isError(n));
      if (codec != 1) {  // XOR-packed: the records themselves are what must hold no name
        const auto* packed = reinterpret_cast<const uint8_t*>(out.data());
        auto len = PackedRecordsLength(packed, n, path);
        EXPECT_TRUE(len.ok());
        if (!len.ok()) return all;
        std::string records(*len, '\0');
        auto unpacked = UnpackRecords(
            packed, n, static_cast<PackedLayout>(codec),
            reinterpret_cast<uint8_t*>(records.data()), records.size(), path);
        EXPECT_TRUE(unpacked.ok()) << unpacked.status().message();
        out = records;
      }
      all += out;
    } else {
      all.append(payload, comp_len);
    }
    off += 56 + comp_len;
    chunks++;
  }
  EXPECT_GT(chunks, 0u);
  return all;
}

TEST(AnonymizeTrace, StructureKeptNamesGone) {
  ScratchDir dir;
  WriteSensitiveTrace(dir / "in.iotwin", kPaths);
  // The check below must be able to fail: the input does contain the names.
  std::string raw_in = RawAndDecompressed(dir / "in.iotwin");
  for (const auto& s : kSecrets) EXPECT_NE(raw_in.find(s), std::string::npos) << s;

  Anonymizer a = MakeAnonymizer("a-secret-key-of-enough-length!!", true);
  auto r = AnonymizeTrace(dir / "in.iotwin", dir / "out.iotwin", a);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->meta_keys_dropped, std::vector<std::string>{"custom_note"});

  auto in = testing::ReadTrace(dir / "in.iotwin");
  auto out = testing::ReadTrace(dir / "out.iotwin");
  ASSERT_EQ(in.records.size(), out.records.size());
  // Same records, field for field, except names and identities.
  std::map<std::string, std::string> mapping;  // original path -> anonymized
  std::map<uint64_t, uint64_t> inodes;
  for (size_t i = 0; i < in.records.size(); i++) {
    const auto* hi = reinterpret_cast<const iot_rec_hdr*>(in.records[i].data());
    const auto* ho = reinterpret_cast<const iot_rec_hdr*>(out.records[i].data());
    ASSERT_EQ(hi->type, ho->type);
    if (hi->type != IOT_REC_SYSCALL) continue;
    const auto& si = As<iot_syscall>(hi);
    const auto& so = As<iot_syscall>(ho);
    EXPECT_EQ(si.op, so.op);
    EXPECT_EQ(si.ts, so.ts);
    EXPECT_EQ(si.offset, so.offset);
    EXPECT_EQ(si.length, so.length);
    EXPECT_EQ(si.ret, so.ret);
    EXPECT_EQ(si.fd, so.fd);
    EXPECT_EQ(si.tid, so.tid);
    EXPECT_EQ(si.path_id != 0, so.path_id != 0);
    for (auto [pi, po] : {std::pair{si.path_id, so.path_id}, std::pair{si.path2_id, so.path2_id}}) {
      if (!pi) continue;
      const std::string& orig = in.strings.at(pi);
      const std::string& anon = out.strings.at(po);
      auto [it, fresh] = mapping.emplace(orig, anon);
      EXPECT_EQ(it->second, anon) << "one name, two tokens: " << orig;
    }
    auto [it, fresh] = inodes.emplace(si.ino, so.ino);
    EXPECT_EQ(it->second, so.ino);  // same file, same (keyed) identity
    if (si.ino) {
      EXPECT_NE(so.ino, si.ino);
    }
  }
  // Distinct names stay distinct; structure and kernel prefixes are kept.
  std::set<std::string> images;
  for (const auto& [o, n] : mapping) images.insert(n);
  EXPECT_EQ(images.size(), mapping.size());
  EXPECT_EQ(mapping.at("/proc/self/status"), "/proc/self/status");
  EXPECT_EQ(mapping.at("/dev/nvme0n1"), "/dev/nvme0n1");
  auto alice = Split(mapping.at("/srv/medical/records/patient_alice.parquet"));
  auto bobby = Split(mapping.at("/srv/medical/records/patient_bobby.parquet"));
  EXPECT_EQ(mapping.at("/srv/medical/records"), "/" + alice[1] + "/" + alice[2] + "/" + alice[3]);
  EXPECT_EQ(alice[3], bobby[3]);
  EXPECT_EQ(mapping.at("patient_alice.parquet"), alice[4]);
  EXPECT_EQ(mapping.at("/srv/medical//records/./patient_bobby.parquet/"),
            "/" + bobby[1] + "/" + bobby[2] + "//" + bobby[3] + "/./" + bobby[4] + "/");
  auto old = Split(mapping.at("/srv/medical/records/patient_alice.parquet.old"));
  ASSERT_EQ(old.size(), 5u);
  EXPECT_EQ(old[3], alice[3]);  // rename target in the same directory
  EXPECT_NE(old[4], alice[4]);
  EXPECT_EQ(old[4].substr(old[4].size() - 4), ".old");
  EXPECT_EQ(alice[4].substr(alice[4].size() - 8), ".parquet");

  // Comms, labels and metadata.
  auto procs = out.Of<iot_proc>(IOT_REC_PROC);
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(std::string(procs[0].comm), a.Comm("scorer"));
  EXPECT_EQ(out.strings.at(procs[0].path_id), a.Path("/opt/acmecorp/bin/scorer"));
  auto intents = out.Of<iot_intent>(IOT_REC_INTENT);
  ASSERT_EQ(intents.size(), 1u);
  EXPECT_EQ(out.strings.at(intents[0].label_id), a.Token("score batch alice"));
  auto blocks = out.Of<iot_block>(IOT_REC_BLOCK);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(std::string(blocks[0].comm), a.Comm("scorer"));
  EXPECT_EQ(blocks[0].ino, inodes.at(1001));
  EXPECT_EQ(out.meta["host"]["hostname"], a.Token("fraud-detector-hostsecret"));
  EXPECT_EQ(out.meta["host"]["kernel"], "6.18.0");
  EXPECT_EQ(out.meta["command"][1], a.Path("--input=/srv/medical/records"));
  EXPECT_FALSE(out.meta.contains("custom_note"));
  EXPECT_TRUE(out.meta["anonymized"]["keep_extensions"].get<bool>());
  ASSERT_TRUE(out.summary.has_value());
  EXPECT_EQ((*out.summary)["stop_reason"], "exited");
  EXPECT_EQ((*out.summary)["import"]["lines"], 3);
  EXPECT_FALSE((*out.summary)["import"].contains("unknown_examples"));

  // Nothing of the originals anywhere: strings and metadata through the reader above, and every
  // byte of the file and of its decompressed chunks here.
  std::string raw = RawAndDecompressed(dir / "out.iotwin");
  for (const auto& s : kSecrets) EXPECT_EQ(raw.find(s), std::string::npos) << s;
  for (const auto& [id, str] : out.strings) {
    for (const auto& s : kSecrets) EXPECT_EQ(str.find(s), std::string::npos) << str;
  }

  // A second trace with the same key names the shared file alike.
  WriteSensitiveTrace(dir / "in2.iotwin", {"/srv/medical/records/patient_alice.parquet"});
  ASSERT_TRUE(AnonymizeTrace(dir / "in2.iotwin", dir / "out2.iotwin", a).ok());
  auto out2 = testing::ReadTrace(dir / "out2.iotwin");
  bool found = false;
  for (const auto& [id, s] : out2.strings) {
    found = found || s == mapping.at("/srv/medical/records/patient_alice.parquet");
  }
  EXPECT_TRUE(found);
}

TEST(AnonymizeKeyFile, ANewKeyIsRandomPrivateAndNeverOverwritesAFile) {
  testing::ScratchDir dir;
  std::string a = dir.path() + "/a.key", b = dir.path() + "/b.key";
  ASSERT_TRUE(Anonymizer::CreateKeyFile(a).ok());
  ASSERT_TRUE(Anonymizer::CreateKeyFile(b).ok());
  struct stat st{};
  ASSERT_EQ(::stat(a.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(static_cast<size_t>(st.st_size), Anonymizer::kNewKeyBytes);
  auto read = [](const std::string& p) {
    std::string bytes(Anonymizer::kNewKeyBytes, '\0');
    int fd = ::open(p.c_str(), O_RDONLY);
    EXPECT_EQ(::read(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    ::close(fd);
    return bytes;
  };
  std::string key_a = read(a);
  EXPECT_NE(key_a, read(b));
  EXPECT_TRUE(Anonymizer::FromKeyFile(a, {}).ok());
  // An existing file, and a symlink planted where the key goes, are refused; neither changes.
  EXPECT_FALSE(Anonymizer::CreateKeyFile(a).ok());
  EXPECT_EQ(read(a), key_a);
  std::string target = dir.path() + "/victim", link = dir.path() + "/link.key";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_FALSE(Anonymizer::CreateKeyFile(link).ok());
  EXPECT_NE(::access(target.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace iotwin::interop
