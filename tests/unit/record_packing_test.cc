// Chunk codec 2: XOR packing of records (format/record_packing.h). Round trips of every record
// shape, the size it saves, hostile payloads (every truncation, every byte flipped, forged
// masks and sizes) that must be errors naming the payload byte and never a crash, and traces
// written packed and unpacked that read back the same. Every unpacking kernel the CPU has is
// tested, and the kernels are checked against each other on every damaged payload.
#include "format/record_packing.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "format/layout.h"
#include "format/records.h"
#include "format/trace_reader.h"
#include "format/trace_writer.h"

namespace iotwin {
namespace {

void AppendRecord(std::vector<uint8_t>* raw, const void* rec, size_t size) {
  const auto* b = static_cast<const uint8_t*>(rec);
  raw->insert(raw->end(), b, b + size);
}

iot_syscall Pread(uint64_t i) {
  iot_syscall s{};
  InitRecord(&s, IOT_REC_SYSCALL);
  s.op = IOT_OP_PREAD64;
  s.ts = 5'000'000'000 + i * 2100;
  s.dur = 900 + i % 37;
  s.tgid = 100;
  s.tid = 100 + static_cast<uint32_t>(i % 4);
  s.ret = 131072;
  s.fd = 7 + static_cast<int32_t>(i % 4);
  s.fd2 = -1;
  s.offset = (i * 7919 % 4096) * 131072;
  s.length = 131072;
  s.ino = 1000 + i % 4;
  s.dev = (8u << 20) | 1;
  return s;
}

// Records of every shape the packer meets: runs of one type, interleaved types, strings of
// different lengths (so one type with several sizes), a header-only record, a record of more
// than 64 words (two mask groups), and a type beyond the referenced ones.
std::vector<uint8_t> MixedRecords(size_t* records) {
  std::vector<uint8_t> raw;
  size_t n = 0;
  auto add = [&](const void* rec, size_t size) {
    AppendRecord(&raw, rec, size);
    n++;
  };
  for (uint64_t i = 0; i < 300; i++) {
    iot_syscall s = Pread(i);
    add(&s, sizeof s);
    if (i % 10 == 0) {
      iot_page_cache pc{};
      InitRecord(&pc, IOT_REC_PAGE_CACHE);
      pc.ts = s.ts + 10;
      pc.ino = s.ino;
      pc.index = i;
      add(&pc, sizeof pc);
    }
    if (i % 50 == 0) {
      std::string text = "/models/shard-" + std::string(i / 50 + 1, 'x') + ".safetensors";
      std::vector<uint8_t> str(sizeof(iot_string) + text.size() + 8, 0);
      auto* rec = reinterpret_cast<iot_string*>(str.data());
      InitRecord(rec, IOT_REC_STRING);
      rec->id = static_cast<uint32_t>(i / 50 + 1);
      rec->len = static_cast<uint16_t>(text.size());
      std::memcpy(str.data() + sizeof(iot_string), text.data(), text.size());
      size_t padded = (sizeof(iot_string) + text.size() + 7) & ~size_t{7};
      rec->hdr.size = static_cast<uint16_t>(padded);
      add(str.data(), padded);
    }
  }
  iot_rec_hdr bare{200, 4};  // a future type with no body
  add(&bare, sizeof bare);
  std::vector<uint8_t> big(4 + 4 * 150, 0);  // 150 words: three mask groups
  iot_rec_hdr big_hdr{77, static_cast<uint16_t>(big.size())};
  std::memcpy(big.data(), &big_hdr, sizeof big_hdr);
  for (size_t w = 0; w < 150; w += 3) big[4 + 4 * w] = static_cast<uint8_t>(w + 1);
  add(big.data(), big.size());
  add(big.data(), big.size());  // same type 77 again: packed against zeros (type >= 64)
  *records = n;
  return raw;
}

std::vector<uint8_t> Pack(const std::vector<uint8_t>& raw, size_t records,
                          PackingKernel kernel = PackingKernel::kPortable) {
  std::vector<uint8_t> packed;
  packed.resize(PackRecords(raw.data(), raw.size(), records, &packed, kernel));
  return packed;
}

Result<std::vector<uint8_t>> Unpack(const std::vector<uint8_t>& packed, PackingKernel kernel) {
  IOTWIN_ASSIGN_OR_RETURN(uint32_t len, PackedRecordsLength(packed.data(), packed.size(), "t"));
  std::vector<uint8_t> out(len);
  IOTWIN_RETURN_IF_ERROR(
      UnpackRecords(packed.data(), packed.size(), out.data(), out.size(), "t", kernel).status());
  return out;
}

// Each test runs with every unpacking kernel this CPU has (CI's and the development machine's
// have both).
class RecordPacking : public ::testing::TestWithParam<PackingKernel> {
 protected:
  void SetUp() override {
    if (!PackingKernelSupported(GetParam())) GTEST_SKIP() << "this CPU lacks the kernel";
  }
};

std::string KernelName(const ::testing::TestParamInfo<PackingKernel>& info) {
  return info.param == PackingKernel::kAvx512 ? "Avx512" : "Portable";
}

TEST_P(RecordPacking, EveryShapeRoundTripsByteForByte) {
  size_t records = 0;
  std::vector<uint8_t> raw = MixedRecords(&records);
  std::vector<uint8_t> packed = Pack(raw, records, GetParam());
  // Every kernel packs to the same bytes.
  EXPECT_EQ(packed, Pack(raw, records, PackingKernel::kPortable));
  EXPECT_LE(packed.size(), PackedBound(raw.size(), records));
  auto out = Unpack(packed, GetParam());
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, raw);
  auto count =
      UnpackRecords(packed.data(), packed.size(), out->data(), out->size(), "t", GetParam());
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, records);
}

// The writer packs every chunk into one buffer: it is grown, never shrunk (no zero-filling per
// chunk), and what a smaller chunk leaves after its packed length does not matter.
TEST_P(RecordPacking, AReusedBufferPacksTheSame) {
  size_t records = 0;
  std::vector<uint8_t> big = MixedRecords(&records);
  std::vector<uint8_t> small;
  for (uint64_t i = 0; i < 10; i++) {
    iot_syscall s = Pread(i);
    AppendRecord(&small, &s, sizeof s);
  }
  std::vector<uint8_t> reused;
  const size_t big_len = PackRecords(big.data(), big.size(), records, &reused, GetParam());
  const size_t capacity = reused.size();
  const size_t small_len = PackRecords(small.data(), small.size(), 10, &reused, GetParam());
  EXPECT_EQ(reused.size(), capacity) << "the buffer was shrunk";
  EXPECT_LT(small_len, big_len);
  std::vector<uint8_t> packed(reused.begin(), reused.begin() + static_cast<ptrdiff_t>(small_len));
  EXPECT_EQ(packed, Pack(small, 10));
  auto out = Unpack(packed, GetParam());
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, small);
}

TEST_P(RecordPacking, SimilarRecordsPackToAFractionOfTheirSize) {
  std::vector<uint8_t> raw;
  for (uint64_t i = 0; i < 1000; i++) {
    iot_syscall s = Pread(i);
    AppendRecord(&raw, &s, sizeof s);
  }
  std::vector<uint8_t> packed = Pack(raw, 1000, GetParam());
  // Per pread: header 4, mask 4, and the words that changed (ts, dur, tid, fd, offset, ino).
  EXPECT_LT(packed.size(), raw.size() * 35 / 100) << packed.size() << " of " << raw.size();
  auto out = Unpack(packed, GetParam());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, raw);
}

TEST_P(RecordPacking, EveryTruncationIsAnErrorNamingTheByte) {
  size_t records = 0;
  std::vector<uint8_t> raw = MixedRecords(&records);
  std::vector<uint8_t> packed = Pack(raw, records);
  for (size_t len = 0; len < packed.size(); len++) {
    std::vector<uint8_t> cut(packed.begin(), packed.begin() + static_cast<ptrdiff_t>(len));
    std::vector<uint8_t> out(raw.size());
    auto r = UnpackRecords(cut.data(), cut.size(), out.data(), out.size(), "chunk 3", GetParam());
    ASSERT_FALSE(r.ok()) << "a payload cut to " << len << " bytes unpacked";
    EXPECT_EQ(r.status().code(), Status::Code::kCorrupt);
    EXPECT_NE(r.status().message().find("chunk 3"), std::string::npos) << r.status().message();
  }
}

TEST_P(RecordPacking, FlippedBytesNeverReadOrWriteOutOfBounds) {
  size_t records = 0;
  std::vector<uint8_t> raw = MixedRecords(&records);
  const std::vector<uint8_t> packed = Pack(raw, records);
  std::mt19937 rng(7);
  size_t errors = 0;
  for (size_t at = kPackedPreludeBytes; at < packed.size(); at++) {
    std::vector<uint8_t> bad = packed;
    bad[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
    std::vector<uint8_t> out(raw.size());  // exact size: ASan sees any overrun
    auto r = UnpackRecords(bad.data(), bad.size(), out.data(), out.size(), "t", GetParam());
    if (!r.ok()) {
      errors++;
      EXPECT_NE(r.status().message().find("payload"), std::string::npos) << r.status().message();
    }
  }
  // Flips in headers and masks change the framing and must be caught; flips in XORed words
  // only change values (the chunk's XXH3 catches those in a file).
  EXPECT_GT(errors, 0u);
}

TEST_P(RecordPacking, ForgedHeadersAreRefused) {
  iot_syscall s = Pread(1);
  std::vector<uint8_t> raw;
  AppendRecord(&raw, &s, sizeof s);
  std::vector<uint8_t> packed = Pack(raw, 1);
  auto expect_error = [&](std::vector<uint8_t> bad, size_t out_len, const char* says) {
    std::vector<uint8_t> out(out_len);
    auto r = UnpackRecords(bad.data(), bad.size(), out.data(), out.size(), "t", GetParam());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  };
  std::vector<uint8_t> bad = packed;
  uint16_t size = 6;  // not a multiple of 4
  std::memcpy(bad.data() + kPackedPreludeBytes + 2, &size, 2);
  expect_error(bad, raw.size(), "not a multiple of 4");
  bad = packed;
  bad[kPackedPreludeBytes + 4 + 3] |= 0x80;  // mask bit of word 31, beyond the record's 27
  expect_error(bad, raw.size(), "beyond the record");
  bad = packed;
  uint32_t longer = static_cast<uint32_t>(raw.size() + 8);  // prelude promises more
  std::memcpy(bad.data(), &longer, 4);
  expect_error(bad, raw.size() + 8, "ends after");
  expect_error(packed, raw.size() - 8, "holds 112 record bytes");
  size = 120;  // a record larger than the bytes promised
  bad = packed;
  std::memcpy(bad.data() + kPackedPreludeBytes + 2, &size, 2);
  expect_error(bad, raw.size(), "overrun");
}

INSTANTIATE_TEST_SUITE_P(Kernels, RecordPacking,
                         ::testing::Values(PackingKernel::kPortable, PackingKernel::kAvx512),
                         KernelName);

// The kernels accept and refuse exactly the same payloads: the same records out, the same
// error text, for every truncation of a mixed payload and a flipped bit in each of its bytes.
TEST(RecordPackingKernels, AgreeOnEveryCutAndEveryFlippedByte) {
  if (!PackingKernelSupported(PackingKernel::kAvx512)) GTEST_SKIP() << "this CPU lacks AVX-512F";
  size_t records = 0;
  std::vector<uint8_t> raw = MixedRecords(&records);
  const std::vector<uint8_t> packed = Pack(raw, records);
  auto same = [&](const std::vector<uint8_t>& payload, const std::string& what) {
    std::vector<uint8_t> a(raw.size()), b(raw.size());
    auto ra = UnpackRecords(payload.data(), payload.size(), a.data(), a.size(), "t",
                            PackingKernel::kPortable);
    auto rb = UnpackRecords(payload.data(), payload.size(), b.data(), b.size(), "t",
                            PackingKernel::kAvx512);
    ASSERT_EQ(ra.ok(), rb.ok()) << what;
    if (ra.ok()) {
      EXPECT_EQ(*ra, *rb) << what;
      EXPECT_EQ(a, b) << what;
    } else {
      EXPECT_EQ(ra.status().message(), rb.status().message()) << what;
    }
  };
  for (size_t len = 0; len <= packed.size(); len++) {
    same(std::vector<uint8_t>(packed.begin(), packed.begin() + static_cast<ptrdiff_t>(len)),
         "cut to " + std::to_string(len));
  }
  std::mt19937 rng(11);
  for (size_t at = 0; at < packed.size(); at++) {
    std::vector<uint8_t> bad = packed;
    const unsigned bit = rng() % 8;
    bad[at] ^= static_cast<uint8_t>(1u << bit);
    same(bad, "byte " + std::to_string(at) + " bit " + std::to_string(bit));
    if (HasFatalFailure()) return;
  }
}

// The packing kernels write the same bytes for records of every size from 0 to 200 body words
// (every tail length of the 16-word groups), with random words changed.
TEST(RecordPackingKernels, PackTheSameBytesForEveryBodySize) {
  if (!PackingKernelSupported(PackingKernel::kAvx512)) GTEST_SKIP() << "this CPU lacks AVX-512F";
  std::mt19937 rng(5);
  for (uint16_t words = 0; words <= 200; words++) {
    std::vector<uint8_t> raw;
    const uint16_t size = static_cast<uint16_t>(4 + 4 * words);
    std::vector<uint8_t> rec(size, 0);
    for (int copy = 0; copy < 6; copy++) {
      iot_rec_hdr h{static_cast<uint16_t>(copy % 2 ? 9 : 70), size};  // referenced and not
      std::memcpy(rec.data(), &h, sizeof h);
      for (uint16_t w = 0; w < words; w++) {
        if (rng() % 3 == 0) {
          const uint32_t v = (rng() % 4 == 0) ? 0 : static_cast<uint32_t>(rng());
          std::memcpy(rec.data() + 4 + 4 * w, &v, 4);
        }
      }
      raw.insert(raw.end(), rec.begin(), rec.end());
    }
    const std::vector<uint8_t> portable = Pack(raw, 6, PackingKernel::kPortable);
    ASSERT_EQ(Pack(raw, 6, PackingKernel::kAvx512), portable) << words << " body words";
    auto out = Unpack(portable, PackingKernel::kAvx512);
    ASSERT_TRUE(out.ok()) << out.status().message();
    ASSERT_EQ(*out, raw) << words << " body words";
  }
}

class PackedTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/iotwin-packing-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes 20,000 preads and some strings in 64 KiB chunks; returns the chunk codecs seen.
  std::vector<uint16_t> Write(const std::string& path, bool pack) {
    TraceWriterOptions o;
    o.chunk_bytes = 64 << 10;
    o.pack_records = pack;
    auto w = TraceWriter::Create(path, {{"tool", "test"}}, o);
    EXPECT_TRUE(w.ok());
    for (uint64_t i = 0; i < 20000; i++) {
      if (i % 1000 == 0) {
        EXPECT_TRUE((*w)->InternString("/f/" + std::to_string(i)).ok());
      }
      EXPECT_TRUE((*w)->Append(Pread(i)).ok());
    }
    EXPECT_TRUE((*w)->Finish({}).ok());
    std::vector<uint16_t> codecs;
    auto r = TraceReader::Open(path);
    EXPECT_TRUE(r.ok());
    if (!r.ok()) return codecs;
    for (const auto& e : (*r)->index()) {
      layout::ChunkHeader h;
      std::ifstream in(path, std::ios::binary);
      in.seekg(static_cast<std::streamoff>(e.offset));
      in.read(reinterpret_cast<char*>(&h), sizeof h);
      codecs.push_back(h.codec);
    }
    return codecs;
  }

  std::vector<std::vector<uint8_t>> Read(const std::string& path, uint16_t* minor) {
    std::vector<std::vector<uint8_t>> recs;
    auto r = TraceReader::Open(path);
    EXPECT_TRUE(r.ok());
    if (!r.ok()) return recs;
    *minor = static_cast<uint16_t>((*r)->format_minor());
    for (;;) {
      auto n = (*r)->Next();
      EXPECT_TRUE(n.ok()) << n.status().message();
      if (!n.ok() || !*n) break;
      const auto* b = reinterpret_cast<const uint8_t*>(*n);
      recs.emplace_back(b, b + (*n)->size);
    }
    return recs;
  }

  std::string dir_;
};

TEST_F(PackedTraceTest, PackedAndPlainTracesReadTheSameAndPackedIsSmaller) {
  std::string packed = dir_ + "/packed.iotwin", plain = dir_ + "/plain.iotwin";
  std::vector<uint16_t> packed_codecs = Write(packed, true);
  std::vector<uint16_t> plain_codecs = Write(plain, false);
  ASSERT_GT(packed_codecs.size(), 10u);
  for (uint16_t c : packed_codecs) EXPECT_EQ(c, layout::kCodecZstdPacked);
  for (uint16_t c : plain_codecs) EXPECT_EQ(c, layout::kCodecZstd);
  uint16_t minor_packed = 0, minor_plain = 0;
  auto a = Read(packed, &minor_packed);
  auto b = Read(plain, &minor_plain);
  EXPECT_EQ(a.size(), 20020u);
  EXPECT_EQ(a, b);
  EXPECT_EQ(minor_packed, layout::kMinor);
  EXPECT_LT(std::filesystem::file_size(packed), std::filesystem::file_size(plain));
}

}  // namespace
}  // namespace iotwin
