#include "format/record_packing.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
// The AVX-512 kernels are built on x86-64 and chosen at run time (PackingKernelSupported).
#define IOTWIN_HAVE_AVX512_KERNEL 1
#endif

#include "iotwin_abi.h"

namespace iotwin {
namespace {

// Records of types below this use the previous record of their type as reference; others (none
// are defined yet) are packed against zeros.
constexpr size_t kReferencedTypes = 64;

// The reference of a record with none: the body of a record of the largest size, zeroed.
const uint8_t kZeroBody[UINT16_MAX] = {};

uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void Store32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, sizeof v); }

// The previous record of each type: its body and size (0: none yet in this chunk).
struct References {
  std::array<const uint8_t*, kReferencedTypes> body{};
  std::array<uint16_t, kReferencedTypes> size{};

  const uint8_t* Find(uint16_t type, uint16_t size_now) const {
    if (type >= kReferencedTypes || size[type] != size_now) return nullptr;
    return body[type];
  }
  void Set(uint16_t type, uint16_t size_now, const uint8_t* b) {
    if (type >= kReferencedTypes) return;
    body[type] = b;
    size[type] = size_now;
  }
};

}  // namespace

size_t PackedBound(size_t raw_len, size_t records) {
  // Per record: the header, one mask byte per 8 body words (at most body/32 + 1), the words.
  return kPackedPreludeBytes + raw_len + raw_len / 32 + records;
}

namespace {

// The packing kernels: XOR a record's `words` body words with the reference's, write the mask of
// the non-zero results at `mask` and those results from `o`; each returns the end of its output.

// Portable kernel, branch-free: every word is stored, and the output advances past the non-zero
// ones only (PackedBound leaves room for all of them).
uint8_t* PackPortable(const uint8_t* body, const uint8_t* ref, size_t words, uint8_t* mask,
                      uint8_t* o) {
  for (size_t group = 0; group < words; group += 64) {
    const size_t n = std::min<size_t>(64, words - group);
    uint64_t bits = 0;
    for (size_t i = 0; i < n; i++) {
      const size_t w = group + i;
      const uint32_t x = Load32(body + 4 * w) ^ Load32(ref + 4 * w);
      Store32(o, x);
      const uint64_t nonzero = x != 0;
      o += 4 * nonzero;
      bits |= nonzero << i;
    }
    for (size_t b = 0; b < (n + 7) / 8; b++) {
      mask[group / 8 + b] = static_cast<uint8_t>(bits >> (8 * b));
    }
  }
  return o;
}

#ifdef IOTWIN_HAVE_AVX512_KERNEL
// AVX-512 kernel: 16 words at a time; a compress (vpcompressd) gathers the non-zero XORed words,
// and a masked store writes just those. (Compressing straight to memory is microcoded and slow
// on some CPUs, AMD Zen 4 among them; into a register it is not.)
[[gnu::target("avx512f,popcnt")]] uint8_t* PackAvx512(const uint8_t* body, const uint8_t* ref,
                                                      size_t words, uint8_t* mask, uint8_t* o) {
  for (size_t word = 0; word < words; word += 16) {
    const size_t n = std::min<size_t>(16, words - word);
    const auto keep = static_cast<__mmask16>(n == 16 ? 0xffffu : (1u << n) - 1);
    const __m512i x = _mm512_xor_si512(_mm512_maskz_loadu_epi32(keep, body + 4 * word),
                                       _mm512_maskz_loadu_epi32(keep, ref + 4 * word));
    const __mmask16 nonzero = _mm512_test_epi32_mask(x, x);
    const unsigned count = static_cast<unsigned>(std::popcount(static_cast<unsigned>(nonzero)));
    _mm512_mask_storeu_epi32(o, static_cast<__mmask16>((1u << count) - 1),
                             _mm512_maskz_compress_epi32(nonzero, x));
    o += 4 * static_cast<size_t>(count);
    mask[word / 8] = static_cast<uint8_t>(nonzero);
    if (n > 8) mask[word / 8 + 1] = static_cast<uint8_t>(nonzero >> 8);
  }
  return o;
}
#endif

template <uint8_t* (*PackWords)(const uint8_t*, const uint8_t*, size_t, uint8_t*, uint8_t*)>
[[gnu::always_inline]] inline size_t PackWith(const uint8_t* raw, size_t raw_len,
                                              std::vector<uint8_t>* out) {
  uint8_t* o = out->data();
  Store32(o, static_cast<uint32_t>(raw_len));
  Store32(o + 4, 0);
  o += kPackedPreludeBytes;
  References refs;
  for (size_t at = 0; at + sizeof(iot_rec_hdr) <= raw_len;) {
    iot_rec_hdr h;
    std::memcpy(&h, raw + at, sizeof h);
    // The writer's records are whole and padded to 8 bytes; anything else would be a caller's
    // bug, and packing stops there rather than read past the chunk (the unpacker then reports
    // the records missing).
    if (h.size < sizeof h || h.size % 4 != 0 || h.size > raw_len - at) break;
    const uint8_t* body = raw + at + sizeof h;
    const size_t words = (h.size - sizeof h) / 4;
    std::memcpy(o, &h, sizeof h);
    uint8_t* mask = o + sizeof h;
    const uint8_t* found = refs.Find(h.type, h.size);
    o = PackWords(body, found ? found : kZeroBody, words, mask, mask + (words + 7) / 8);
    refs.Set(h.type, h.size, body);
    at += h.size;
  }
  return static_cast<size_t>(o - out->data());
}

#ifdef IOTWIN_HAVE_AVX512_KERNEL
[[gnu::target("avx512f,popcnt")]] size_t PackAvx512Records(const uint8_t* raw, size_t raw_len,
                                                           std::vector<uint8_t>* out) {
  return PackWith<PackAvx512>(raw, raw_len, out);
}
#endif

}  // namespace

size_t PackRecords(const uint8_t* raw, size_t raw_len, size_t records, std::vector<uint8_t>* out,
                   PackingKernel kernel) {
  const size_t bound = PackedBound(raw_len, records);
  if (out->size() < bound) out->resize(bound);
#ifdef IOTWIN_HAVE_AVX512_KERNEL
  if (kernel == PackingKernel::kAvx512 && PackingKernelSupported(kernel)) {
    return PackAvx512Records(raw, raw_len, out);
  }
#endif
  (void)kernel;  // an unsupported kernel packs portably: the output is the same
  return PackWith<PackPortable>(raw, raw_len, out);
}

size_t PackRecords(const uint8_t* raw, size_t raw_len, size_t records, std::vector<uint8_t>* out) {
  return PackRecords(raw, raw_len, records, out, FastestPackingKernel());
}

Result<uint32_t> PackedRecordsLength(const uint8_t* packed, size_t packed_len,
                                     const std::string& what) {
  if (packed_len < kPackedPreludeBytes) {
    return Status::Corrupt("{}: packed payload of {} bytes is shorter than its {}-byte prelude",
                           what, packed_len, kPackedPreludeBytes);
  }
  return Load32(packed);
}

namespace {

// What is wrong with a packed record, found on the hot path and described off it.
enum class PackedProblem {
  kNone,
  kTornHeader,
  kBadSize,
  kOverrun,
  kTornMask,
  kMaskBeyond,
  kTornWords
};

// One packed record, bounds-checked: its header, its word mask and its XORed words (one per set
// mask bit, all inside the payload).
struct PackedRecord {
  iot_rec_hdr h;
  size_t words;  // body words
  const uint8_t* mask;
  const uint8_t* xored;
};

[[gnu::always_inline]] inline size_t MaskPopcount(const uint8_t* mask, size_t bytes,
                                                  const uint8_t* end) {
  size_t count = 0;
  size_t at = 0;
  for (; at + 8 <= bytes; at += 8) {
    uint64_t bits;
    std::memcpy(&bits, mask + at, 8);
    count += static_cast<size_t>(std::popcount(bits));
  }
  if (at == bytes) return count;
  uint64_t bits = 0;
  const size_t n = bytes - at;
  if (end - (mask + at) >= 8) {  // one load, the bytes past the mask cleared
    std::memcpy(&bits, mask + at, 8);
    bits &= (uint64_t{1} << (8 * n)) - 1;
  } else {
    std::memcpy(&bits, mask + at, n);
  }
  return count + static_cast<size_t>(std::popcount(bits));
}

// Parses the packed record at payload byte `in`, `room` record bytes still to produce. Shared by
// both kernels, so they accept and refuse exactly the same payloads.
[[gnu::always_inline]] inline PackedProblem ParsePacked(const uint8_t* packed, size_t packed_len,
                                                        size_t in, size_t room, PackedRecord* rec) {
  if (packed_len - in < sizeof rec->h) return PackedProblem::kTornHeader;
  std::memcpy(&rec->h, packed + in, sizeof rec->h);
  const size_t size = rec->h.size;
  if (size < sizeof rec->h || size % 4 != 0) return PackedProblem::kBadSize;
  if (size > room) return PackedProblem::kOverrun;
  const size_t words = (size - sizeof rec->h) / 4;
  const size_t mask_bytes = (words + 7) / 8;
  const uint8_t* mask = packed + in + sizeof rec->h;
  if (packed_len - in - sizeof rec->h < mask_bytes) return PackedProblem::kTornMask;
  if (words % 8 != 0 && (mask[mask_bytes - 1] >> (words % 8)) != 0) {
    return PackedProblem::kMaskBeyond;
  }
  const uint8_t* end = packed + packed_len;
  const uint8_t* xored = mask + mask_bytes;
  // Counting the mask's bits is needed only where the payload may end within the record's
  // words (its last records): elsewhere there is room for every word the mask could name.
  const size_t words_left = static_cast<size_t>(end - xored) / 4;
  if (words_left < words && words_left < MaskPopcount(mask, mask_bytes, end)) {
    return PackedProblem::kTornWords;
  }
  rec->words = words;
  rec->mask = mask;
  rec->xored = xored;
  return PackedProblem::kNone;
}

[[gnu::cold]] Status DescribeProblem(PackedProblem problem, const PackedRecord& rec,
                                     uint32_t record, size_t in, size_t out_len,
                                     const std::string& what) {
  switch (problem) {
    case PackedProblem::kTornHeader:
      return Status::Corrupt("{}: packed record {} at payload byte {}: torn header", what, record,
                             in);
    case PackedProblem::kBadSize:
      return Status::Corrupt(
          "{}: packed record {} at payload byte {}: size {} is not a multiple of 4 of at least 4",
          what, record, in, rec.h.size);
    case PackedProblem::kOverrun:
      return Status::Corrupt(
          "{}: packed record {} at payload byte {}: its {} bytes overrun the {} record bytes "
          "promised",
          what, record, in, rec.h.size, out_len);
    case PackedProblem::kTornMask:
      return Status::Corrupt("{}: packed record {} at payload byte {}: torn word mask", what,
                             record, in);
    case PackedProblem::kMaskBeyond:
      return Status::Corrupt(
          "{}: packed record {} at payload byte {}: its mask names words beyond the record's {}",
          what, record, in, (rec.h.size - sizeof rec.h) / 4);
    case PackedProblem::kTornWords:
      return Status::Corrupt("{}: packed record {} at payload byte {}: torn XORed words", what,
                             record, in);
    case PackedProblem::kNone:
      break;
  }
  return Status::Internal("{}: packed record {}: no problem to describe", what, record);
}

// The kernels: `ref` is the reference body (kZeroBody for none); each returns the end of the
// record's XORed words.

// Portable kernel: the reference body copied, then each changed word XORed in.
const uint8_t* ApplyPortable(const PackedRecord& rec, const uint8_t* ref, uint8_t* body) {
  std::memcpy(body, ref, 4 * rec.words);
  const uint8_t* x = rec.xored;
  const size_t mask_bytes = (rec.words + 7) / 8;
  for (size_t group = 0; group < mask_bytes; group += 8) {
    const size_t n = std::min<size_t>(8, mask_bytes - group);
    uint64_t bits = 0;
    std::memcpy(&bits, rec.mask + group, n);
    uint8_t* const group_body = body + 32 * group;
    for (; bits != 0; bits &= bits - 1) {
      uint8_t* word = group_body + 4 * static_cast<size_t>(std::countr_zero(bits));
      Store32(word, Load32(word) ^ Load32(x));
      x += 4;
    }
  }
  return x;
}

#ifdef IOTWIN_HAVE_AVX512_KERNEL
// AVX-512 kernel: 16 body words at a time, branch-free. An expanding load puts the changed words
// at their mask's positions (and zeros elsewhere), which are XORed with the reference's words;
// masked loads and stores touch only the record's own words.
[[gnu::target("avx512f,popcnt")]] const uint8_t* ApplyAvx512(const PackedRecord& rec,
                                                             const uint8_t* ref, uint8_t* body) {
  const uint8_t* x = rec.xored;
  for (size_t word = 0; word < rec.words; word += 16) {
    const size_t n = std::min<size_t>(16, rec.words - word);
    const auto keep = static_cast<__mmask16>(n == 16 ? 0xffffu : (1u << n) - 1);
    unsigned bits = rec.mask[word / 8];
    if (n > 8) bits |= static_cast<unsigned>(rec.mask[word / 8 + 1]) << 8;
    const __m512i changed = _mm512_maskz_expandloadu_epi32(static_cast<__mmask16>(bits), x);
    const __m512i base = _mm512_maskz_loadu_epi32(keep, ref + 4 * word);
    _mm512_mask_storeu_epi32(body + 4 * word, keep, _mm512_xor_si512(base, changed));
    x += 4 * static_cast<size_t>(std::popcount(bits));
  }
  return x;
}
#endif

template <const uint8_t* (*Apply)(const PackedRecord&, const uint8_t*, uint8_t*)>
[[gnu::always_inline]] inline Result<uint32_t> UnpackWith(const uint8_t* packed, size_t packed_len,
                                                          uint8_t* out, size_t out_len,
                                                          const std::string& what) {
  IOTWIN_ASSIGN_OR_RETURN(uint32_t expect, PackedRecordsLength(packed, packed_len, what));
  if (expect != out_len) {
    return Status::Corrupt("{}: packed payload holds {} record bytes, {} expected", what, expect,
                           out_len);
  }
  References refs;
  size_t in = kPackedPreludeBytes;
  size_t produced = 0;
  uint32_t records = 0;
  while (in < packed_len) {
    PackedRecord rec;
    const PackedProblem problem = ParsePacked(packed, packed_len, in, out_len - produced, &rec);
    if (problem != PackedProblem::kNone) {
      return DescribeProblem(problem, rec, records, in, out_len, what);
    }
    uint8_t* dst = out + produced;
    std::memcpy(dst, &rec.h, sizeof rec.h);
    uint8_t* body = dst + sizeof rec.h;
    const uint8_t* ref = refs.Find(rec.h.type, rec.h.size);
    const uint8_t* next = Apply(rec, ref ? ref : kZeroBody, body);
    refs.Set(rec.h.type, rec.h.size, body);
    produced += rec.h.size;
    in = static_cast<size_t>(next - packed);
    records++;
  }
  if (produced != out_len) {
    return Status::Corrupt("{}: packed payload ends after {} of its {} record bytes", what,
                           produced, out_len);
  }
  return records;
}

#ifdef IOTWIN_HAVE_AVX512_KERNEL
[[gnu::target("avx512f,popcnt")]] Result<uint32_t> UnpackAvx512(const uint8_t* packed,
                                                                size_t packed_len, uint8_t* out,
                                                                size_t out_len,
                                                                const std::string& what) {
  return UnpackWith<ApplyAvx512>(packed, packed_len, out, out_len, what);
}
#endif

}  // namespace

bool PackingKernelSupported(PackingKernel kernel) {
  switch (kernel) {
    case PackingKernel::kPortable:
      return true;
    case PackingKernel::kAvx512:
#ifdef IOTWIN_HAVE_AVX512_KERNEL
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("popcnt");
#else
      return false;
#endif
  }
  return false;
}

Result<uint32_t> UnpackRecords(const uint8_t* packed, size_t packed_len, uint8_t* out,
                               size_t out_len, const std::string& what, PackingKernel kernel) {
  if (!PackingKernelSupported(kernel)) {
    return Status::Unsupported("{}: this CPU cannot run the {} unpacking kernel", what,
                               kernel == PackingKernel::kAvx512 ? "AVX-512" : "portable");
  }
#ifdef IOTWIN_HAVE_AVX512_KERNEL
  if (kernel == PackingKernel::kAvx512) return UnpackAvx512(packed, packed_len, out, out_len, what);
#endif
  return UnpackWith<ApplyPortable>(packed, packed_len, out, out_len, what);
}

PackingKernel FastestPackingKernel() {
  static const PackingKernel fastest = PackingKernelSupported(PackingKernel::kAvx512)
                                           ? PackingKernel::kAvx512
                                           : PackingKernel::kPortable;
  return fastest;
}

Result<uint32_t> UnpackRecords(const uint8_t* packed, size_t packed_len, uint8_t* out,
                               size_t out_len, const std::string& what) {
  return UnpackRecords(packed, packed_len, out, out_len, what, FastestPackingKernel());
}

}  // namespace iotwin
