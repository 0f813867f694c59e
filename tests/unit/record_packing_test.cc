// Chunk codecs 2 and 3: XOR packing of records (format/record_packing.h). Round trips of every
// record shape, the size it saves, hostile payloads (every truncation, every byte flipped, forged
// masks, sizes, shape ids and references) that must be errors naming the payload byte and never
// a crash, and traces written packed and unpacked that read back the same. Both layouts are
// tested with every unpacking kernel the CPU has, and the kernels are checked against each other
// on every damaged payload.
#include "format/record_packing.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <bit>
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

std::vector<uint8_t> Pack(const std::vector<uint8_t>& raw, size_t records, PackedLayout layout,
                          PackingKernel kernel = PackingKernel::kPortable) {
  std::vector<uint8_t> packed;
  packed.resize(PackRecords(raw.data(), raw.size(), records, &packed, layout, kernel));
  return packed;
}

Result<std::vector<uint8_t>> Unpack(const std::vector<uint8_t>& packed, PackedLayout layout,
                                    PackingKernel kernel) {
  IOTWIN_ASSIGN_OR_RETURN(uint32_t len, PackedRecordsLength(packed.data(), packed.size(), "t"));
  std::vector<uint8_t> out(len);
  IOTWIN_RETURN_IF_ERROR(
      UnpackRecords(packed.data(), packed.size(), layout, out.data(), out.size(), "t", kernel)
          .status());
  return out;
}

struct PackingCase {
  PackedLayout layout;
  PackingKernel kernel;
};

// Each test runs in both layouts with every unpacking kernel this CPU has (CI's and the
// development machine's have both).
class RecordPacking : public ::testing::TestWithParam<PackingCase> {
 protected:
  void SetUp() override {
    if (!PackingKernelSupported(GetParam().kernel)) GTEST_SKIP() << "this CPU lacks the kernel";
  }
  PackedLayout layout() const { return GetParam().layout; }
  PackingKernel kernel() const { return GetParam().kernel; }
  Result<uint32_t> UnpackInto(const std::vector<uint8_t>& packed, std::vector<uint8_t>* out,
                              const std::string& what = "t") const {
    return UnpackRecords(packed.data(), packed.size(), layout(), out->data(), out->size(), what,
                         kernel());
  }
  // Unpacking `bad` into `out_len` record bytes fails with a message that says `says`.
  void ExpectRefused(const std::vector<uint8_t>& bad, size_t out_len, const char* says) const {
    std::vector<uint8_t> out(out_len);
    auto r = UnpackInto(bad, &out);
    ASSERT_FALSE(r.ok()) << says;
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  }
};

std::string CaseName(const ::testing::TestParamInfo<PackingCase>& info) {
  return std::string(info.param.layout == PackedLayout::kShaped ? "Codec3" : "Codec2") +
         (info.param.kernel == PackingKernel::kAvx512 ? "Avx512" : "Portable");
}

TEST_P(RecordPacking, EveryShapeRoundTripsByteForByte) {
  size_t records = 0;
  std::vector<uint8_t> raw = MixedRecords(&records);
  std::vector<uint8_t> packed = Pack(raw, records, layout(), kernel());
  // Every kernel packs to the same bytes.
  EXPECT_EQ(packed, Pack(raw, records, layout(), PackingKernel::kPortable));
  EXPECT_LE(packed.size(), PackedBound(raw.size(), records));
  auto out = Unpack(packed, layout(), kernel());
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, raw);
  auto count = UnpackInto(packed, &*out);
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
  const size_t big_len = PackRecords(big.data(), big.size(), records, &reused, layout(), kernel());
  const size_t capacity = reused.size();
  const size_t small_len = PackRecords(small.data(), small.size(), 10, &reused, layout(), kernel());
  EXPECT_EQ(reused.size(), capacity) << "the buffer was shrunk";
  EXPECT_LT(small_len, big_len);
  std::vector<uint8_t> packed(reused.begin(), reused.begin() + static_cast<ptrdiff_t>(small_len));
  EXPECT_EQ(packed, Pack(small, 10, layout()));
  auto out = Unpack(packed, layout(), kernel());
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, small);
}

TEST_P(RecordPacking, SimilarRecordsPackToAFractionOfTheirSize) {
  std::vector<uint8_t> raw;
  for (uint64_t i = 0; i < 1000; i++) {
    iot_syscall s = Pread(i);
    AppendRecord(&raw, &s, sizeof s);
  }
  std::vector<uint8_t> packed = Pack(raw, 1000, layout(), kernel());
  // Per pread: header 4, mask 4, and the words that changed (ts, dur, tid, fd, offset, ino);
  // in codec 3 a shape byte and a reference byte instead of the header and mask, and, the
  // reference being the same thread's last pread of the same file, fewer words.
  EXPECT_LT(packed.size(), raw.size() * (layout() == PackedLayout::kShaped ? 20 : 35) / 100)
      << packed.size() << " of " << raw.size();
  auto out = Unpack(packed, layout(), kernel());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, raw);
}

TEST_P(RecordPacking, EveryTruncationIsAnErrorNamingTheByte) {
  size_t records = 0;
  std::vector<uint8_t> raw = MixedRecords(&records);
  std::vector<uint8_t> packed = Pack(raw, records, layout());
  for (size_t len = 0; len < packed.size(); len++) {
    std::vector<uint8_t> cut(packed.begin(), packed.begin() + static_cast<ptrdiff_t>(len));
    std::vector<uint8_t> out(raw.size());
    auto r = UnpackInto(cut, &out, "chunk 3");
    ASSERT_FALSE(r.ok()) << "a payload cut to " << len << " bytes unpacked";
    EXPECT_EQ(r.status().code(), Status::Code::kCorrupt);
    EXPECT_NE(r.status().message().find("chunk 3"), std::string::npos) << r.status().message();
  }
}

TEST_P(RecordPacking, FlippedBytesNeverReadOrWriteOutOfBounds) {
  size_t records = 0;
  std::vector<uint8_t> raw = MixedRecords(&records);
  const std::vector<uint8_t> packed = Pack(raw, records, layout());
  std::mt19937 rng(7);
  size_t errors = 0;
  for (size_t at = kPackedPreludeBytes; at < packed.size(); at++) {
    std::vector<uint8_t> bad = packed;
    bad[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
    std::vector<uint8_t> out(raw.size());  // exact size: ASan sees any overrun (of the
                                           // portable kernel: it does not see masked AVX-512
                                           // accesses)
    auto r = UnpackInto(bad, &out);
    if (!r.ok()) {
      errors++;
      EXPECT_NE(r.status().message().find("payload"), std::string::npos) << r.status().message();
    }
  }
  // Flips in headers, masks, shape ids and references change the framing and must be caught;
  // flips in XORed words only change values (the chunk's XXH3 catches those in a file).
  EXPECT_GT(errors, 0u);
}

TEST_P(RecordPacking, ForgedHeadersAreRefused) {
  iot_syscall s = Pread(1);
  std::vector<uint8_t> raw;
  AppendRecord(&raw, &s, sizeof s);
  std::vector<uint8_t> packed = Pack(raw, 1, layout());
  // Codec 3's first record starts with the byte that introduces its shape.
  const size_t header = kPackedPreludeBytes + (layout() == PackedLayout::kShaped ? 1 : 0);
  std::vector<uint8_t> bad = packed;
  uint16_t size = 6;  // not a multiple of 4
  std::memcpy(bad.data() + header + 2, &size, 2);
  ExpectRefused(bad, raw.size(), "not a multiple of 4");
  bad = packed;
  bad[header + 4 + 3] |= 0x80;  // mask bit of word 31, beyond the record's 27
  ExpectRefused(bad, raw.size(), "beyond the record");
  bad = packed;
  uint32_t longer = static_cast<uint32_t>(raw.size() + 8);  // prelude promises more
  std::memcpy(bad.data(), &longer, 4);
  ExpectRefused(bad, raw.size() + 8, "ends after");
  ExpectRefused(packed, raw.size() - 8, "holds 112 record bytes");
  size = 120;  // a record larger than the bytes promised
  bad = packed;
  std::memcpy(bad.data() + header + 2, &size, 2);
  ExpectRefused(bad, raw.size(), "overrun");
}

INSTANTIATE_TEST_SUITE_P(
    LayoutsAndKernels, RecordPacking,
    ::testing::Values(PackingCase{PackedLayout::kPrevious, PackingKernel::kPortable},
                      PackingCase{PackedLayout::kPrevious, PackingKernel::kAvx512},
                      PackingCase{PackedLayout::kShaped, PackingKernel::kPortable},
                      PackingCase{PackedLayout::kShaped, PackingKernel::kAvx512}),
    CaseName);

// Where each record's reference byte is in a codec-3 payload of records of 25 to 32 body words
// (syscall records: a 4-byte mask) and types below 64 only.
std::vector<size_t> ReferenceBytes(const std::vector<uint8_t>& packed) {
  std::vector<std::array<uint8_t, 4>> shapes;  // each shape's mask
  std::vector<size_t> at;
  for (size_t in = kPackedPreludeBytes; in < packed.size();) {
    std::array<uint8_t, 4> mask;
    if (packed[in] == 255) {
      std::memcpy(mask.data(), &packed[in + 5], 4);
      shapes.push_back(mask);
      in += 9;
    } else {
      mask = shapes.at(packed[in]);
      in += 1;
    }
    at.push_back(in++);
    for (uint8_t b : mask) in += 4 * static_cast<size_t>(std::popcount(b));
  }
  return at;
}

// The reference distance of each record of such a payload.
std::vector<int> ReferenceDistances(const std::vector<uint8_t>& packed) {
  std::vector<int> distances;
  for (size_t at : ReferenceBytes(packed)) distances.push_back(packed[at]);
  return distances;
}

// Codec 3 only.
class ShapedPacking : public RecordPacking {};

// Codec 3's own framing: shape ids and references that name what is not there.
TEST_P(ShapedPacking, ForgedShapesAndReferencesAreRefused) {
  std::vector<uint8_t> raw;
  for (uint64_t i = 0; i < 3; i++) {
    iot_syscall s = Pread(i);
    AppendRecord(&raw, &s, sizeof s);
  }
  const std::vector<uint8_t> packed = Pack(raw, 3, layout());
  // Record 0: new shape (1 + 4 + 4 bytes), reference byte 0 (none), its non-zero words.
  const size_t first = kPackedPreludeBytes;
  ASSERT_EQ(packed[first], 255);
  const std::vector<size_t> references = ReferenceBytes(packed);
  ASSERT_EQ(references.size(), 3u);
  const size_t reference0 = references[0];
  ASSERT_EQ(reference0, first + 1 + 4 + 4);
  EXPECT_EQ(packed[reference0], 0);
  std::vector<uint8_t> bad = packed;
  bad[first] = 0;  // shape 0 used before it is defined
  ExpectRefused(bad, raw.size(), "shape 0 is not defined");
  bad = packed;
  bad[reference0] = 1;  // the first record cannot have a reference
  ExpectRefused(bad, raw.size(), "only 0 can be");
  // Record 1 refers to record 0 (the only syscall before it).
  const size_t reference1 = references[1];
  EXPECT_EQ(packed[reference1], 1);
  bad = packed;
  bad[reference1] = 17;  // beyond the 16 records a reference may reach
  ExpectRefused(bad, raw.size(), "17 records of type 2 back");
  bad = packed;
  bad[reference1] = 2;
  ExpectRefused(bad, raw.size(), "only 1 can be");
  // A reference byte cut off.
  bad.assign(packed.begin(), packed.begin() + static_cast<ptrdiff_t>(reference0));
  ExpectRefused(bad, raw.size(), "torn reference byte");
  // Beyond 16 records back with more than 16 before: 20 syscalls, the last one's reference
  // (its last byte before its words; its shape is known by then) made 17.
  {
    std::vector<uint8_t> many;
    for (uint64_t i = 0; i < 20; i++) {
      iot_syscall s = Pread(i);
      AppendRecord(&many, &s, sizeof s);
    }
    std::vector<uint8_t> p = Pack(many, 20, layout());
    const std::vector<size_t> at = ReferenceBytes(p);
    ASSERT_EQ(at.size(), 20u);
    p[at[19]] = 17;
    ExpectRefused(p, many.size(), "17 records of type 2 back, but only 16 can be");
  }
  // A reference of another size: record 1 becomes a 120-byte record of type 2.
  std::vector<uint8_t> mixed = raw;
  iot_syscall s = Pread(5);
  std::vector<uint8_t> longer(sizeof s + 8, 0);
  std::memcpy(longer.data(), &s, sizeof s);
  uint16_t longer_size = static_cast<uint16_t>(longer.size());
  std::memcpy(longer.data() + 2, &longer_size, 2);
  mixed.insert(mixed.begin() + sizeof s, longer.begin(), longer.end());
  const std::vector<uint8_t> mixed_packed = Pack(mixed, 4, layout());
  auto back = Unpack(mixed_packed, layout(), kernel());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, mixed);  // a size of its own: packed against zeros, not a 112-byte record
  // Forged to refer to the 112-byte record before it: refused. Record 1 is a new shape
  // (1 + 4 + 4 mask bytes for its 29 words), then its reference byte (0).
  const size_t longer_reference = ReferenceBytes(mixed_packed).at(1);
  ASSERT_EQ(mixed_packed[longer_reference - 9], 255);
  ASSERT_EQ(mixed_packed[longer_reference], 0);
  bad = mixed_packed;
  bad[longer_reference] = 1;
  ExpectRefused(bad, mixed.size(), "its reference has 112 bytes, the record 120");
}

// More distinct shapes than a chunk's table holds (300 record sizes, twice over): the second
// time, the first 255 shapes are named by their ids and the last 45 spelled out again.
TEST_P(ShapedPacking, ShapesBeyondTheTableRoundTrip) {
  std::vector<uint8_t> raw;
  size_t records = 0;
  size_t expected = kPackedPreludeBytes;  // the packed length that layout implies
  for (int pass = 0; pass < 2; pass++) {
    for (uint16_t words = 1; words <= 300; words++) {
      std::vector<uint8_t> rec(4 + 4 * size_t{words}, 0);
      iot_rec_hdr h{9, static_cast<uint16_t>(rec.size())};
      std::memcpy(rec.data(), &h, sizeof h);
      rec[4] = 0x5a;  // word 0 only: the same shape both times (no reference: sizes differ)
      AppendRecord(&raw, rec.data(), rec.size());
      records++;
      const bool named = pass == 1 && words <= kMaxShapes;
      expected += 1 + (named ? 0 : 4 + (words + 7u) / 8) + 1 + 4;  // shape, [it], ref, word
    }
  }
  const std::vector<uint8_t> packed = Pack(raw, records, layout(), kernel());
  EXPECT_EQ(packed.size(), expected);
  EXPECT_EQ(packed, Pack(raw, records, layout(), PackingKernel::kPortable));
  auto out = Unpack(packed, layout(), kernel());
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, raw);
}

// The writer keeps the previous record as reference unless another saves two words or more:
// one thread alternating between two CPUs (the record two back saves the CPU word only) keeps
// the previous one; two threads reading two files alternately (two back saves the thread, the
// descriptor and the file's identity) take the record two back.
TEST_P(ShapedPacking, AnEarlierReferenceMustSaveTwoWords) {
  std::vector<uint8_t> one_thread, two_threads;
  for (uint64_t i = 0; i < 64; i++) {
    iot_syscall s = Pread(i);
    s.tid = 100;
    s.fd = 7;
    s.ino = 1000;
    s.cpu = static_cast<uint16_t>(i % 2);
    AppendRecord(&one_thread, &s, sizeof s);
    s.cpu = 0;
    s.tid = 100 + static_cast<uint32_t>(i % 2);
    s.fd = 7 + static_cast<int32_t>(i % 2);
    s.ino = 1000 + i % 2;
    AppendRecord(&two_threads, &s, sizeof s);
  }
  std::vector<int> one = ReferenceDistances(Pack(one_thread, 64, layout(), kernel()));
  std::vector<int> two = ReferenceDistances(Pack(two_threads, 64, layout(), kernel()));
  ASSERT_EQ(one.size(), 64u);
  ASSERT_EQ(two.size(), 64u);
  EXPECT_EQ(one[0], 0);  // nothing to refer to
  EXPECT_EQ(two[0], 0);
  EXPECT_EQ(two[1], 1);  // only the previous record exists
  for (size_t i = 1; i < 64; i++) EXPECT_EQ(one[i], 1) << "record " << i;
  for (size_t i = 2; i < 64; i++) EXPECT_EQ(two[i], 2) << "record " << i;
}

INSTANTIATE_TEST_SUITE_P(
    Kernels, ShapedPacking,
    ::testing::Values(PackingCase{PackedLayout::kShaped, PackingKernel::kPortable},
                      PackingCase{PackedLayout::kShaped, PackingKernel::kAvx512}),
    CaseName);

// The kernels accept and refuse exactly the same payloads: the same records out, the same
// error text, for every truncation of a mixed payload and a flipped bit in each of its bytes.
class RecordPackingKernels : public ::testing::TestWithParam<PackedLayout> {};

TEST_P(RecordPackingKernels, AgreeOnEveryCutAndEveryFlippedByte) {
  if (!PackingKernelSupported(PackingKernel::kAvx512)) GTEST_SKIP() << "this CPU lacks AVX-512F";
  const PackedLayout layout = GetParam();
  size_t records = 0;
  std::vector<uint8_t> raw = MixedRecords(&records);
  const std::vector<uint8_t> packed = Pack(raw, records, layout);
  auto same = [&](const std::vector<uint8_t>& payload, const std::string& what) {
    std::vector<uint8_t> a(raw.size()), b(raw.size());
    auto ra = UnpackRecords(payload.data(), payload.size(), layout, a.data(), a.size(), "t",
                            PackingKernel::kPortable);
    auto rb = UnpackRecords(payload.data(), payload.size(), layout, b.data(), b.size(), "t",
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
TEST_P(RecordPackingKernels, PackTheSameBytesForEveryBodySize) {
  if (!PackingKernelSupported(PackingKernel::kAvx512)) GTEST_SKIP() << "this CPU lacks AVX-512F";
  const PackedLayout layout = GetParam();
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
    const std::vector<uint8_t> portable = Pack(raw, 6, layout, PackingKernel::kPortable);
    ASSERT_EQ(Pack(raw, 6, layout, PackingKernel::kAvx512), portable) << words << " body words";
    auto out = Unpack(portable, layout, PackingKernel::kAvx512);
    ASSERT_TRUE(out.ok()) << out.status().message();
    ASSERT_EQ(*out, raw) << words << " body words";
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, RecordPackingKernels,
                         ::testing::Values(PackedLayout::kPrevious, PackedLayout::kShaped),
                         [](const ::testing::TestParamInfo<PackedLayout>& info) {
                           return std::string(info.param == PackedLayout::kShaped ? "Codec3"
                                                                                  : "Codec2");
                         });

class PackedTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/iotwin-packing-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes 20,000 preads and some strings in 64 KiB chunks; returns the chunk codecs seen.
  std::vector<uint16_t> Write(const std::string& path, bool pack,
                              PackedLayout layout = PackedLayout::kShaped) {
    TraceWriterOptions o;
    o.chunk_bytes = 64 << 10;
    o.pack_records = pack;
    o.packed_layout = layout;
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
  std::string shaped = dir_ + "/shaped.iotwin", previous = dir_ + "/previous.iotwin",
              plain = dir_ + "/plain.iotwin";
  std::vector<uint16_t> shaped_codecs = Write(shaped, true);
  std::vector<uint16_t> previous_codecs = Write(previous, true, PackedLayout::kPrevious);
  std::vector<uint16_t> plain_codecs = Write(plain, false);
  ASSERT_GT(shaped_codecs.size(), 10u);
  for (uint16_t c : shaped_codecs) EXPECT_EQ(c, layout::kCodecZstdShaped);
  for (uint16_t c : previous_codecs) EXPECT_EQ(c, layout::kCodecZstdPacked);
  for (uint16_t c : plain_codecs) EXPECT_EQ(c, layout::kCodecZstd);
  uint16_t minor_shaped = 0, minor_previous = 0, minor_plain = 0;
  auto a = Read(shaped, &minor_shaped);
  auto b = Read(previous, &minor_previous);
  auto c = Read(plain, &minor_plain);
  EXPECT_EQ(a.size(), 20020u);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  EXPECT_EQ(minor_shaped, layout::kMinor);
  EXPECT_LT(std::filesystem::file_size(shaped), std::filesystem::file_size(plain));
  EXPECT_LT(std::filesystem::file_size(previous), std::filesystem::file_size(plain));
}

}  // namespace
}  // namespace iotwin
