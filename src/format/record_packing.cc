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

#include <xxhash.h>

#include "iotwin_abi.h"

namespace iotwin {
namespace {

// Records of types below this use the previous record of their type as reference; others (none
// are defined yet) are packed against zeros.
constexpr size_t kReferencedTypes = 64;

// Codec 3: the shape byte that introduces a new shape (ids are 0..kMaxShapes-1).
constexpr uint8_t kNewShape = 255;
static_assert(kMaxShapes == kNewShape);

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
  // Per record: the header, one mask byte per 8 body words (at most body/32 + 1), the words,
  // and in codec 3 a shape byte and a reference byte.
  return kPackedPreludeBytes + raw_len + raw_len / 32 + 3 * records;
}

namespace {

// The packing kernels: XOR a record's `words` body words with the reference's, write the mask of
// the non-zero results at `mask` and those results from `o`; each returns the end of its output,
// and the mask's first 64 bits in *first_bits (codec 3 keys its shapes with them without
// reading back the bytes just stored, which would stall on store forwarding).

// Portable kernel, branch-free: every word is stored, and the output advances past the non-zero
// ones only (PackedBound leaves room for all of them).
uint8_t* PackPortable(const uint8_t* body, const uint8_t* ref, size_t words, uint8_t* mask,
                      uint8_t* o, uint64_t* first_bits) {
  *first_bits = 0;
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
    if (group == 0) *first_bits = bits;
  }
  return o;
}

#ifdef IOTWIN_HAVE_AVX512_KERNEL
// AVX-512 kernel: 16 words at a time; a compress (vpcompressd) gathers the non-zero XORed words,
// and a masked store writes just those. (Compressing straight to memory is microcoded and slow
// on some CPUs, AMD Zen 4 among them; into a register it is not.)
[[gnu::target("avx512f,popcnt")]] uint8_t* PackAvx512(const uint8_t* body, const uint8_t* ref,
                                                      size_t words, uint8_t* mask, uint8_t* o,
                                                      uint64_t* first_bits) {
  uint64_t bits = 0;
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
    if (word < 64) bits |= static_cast<uint64_t>(nonzero) << word;
  }
  *first_bits = bits;
  return o;
}
#endif

// Codec 3's packer state: the last kMaxReferenceDistance records of each referenced type.
struct RecentRecords {
  std::array<const uint8_t*, kMaxReferenceDistance> body;
  std::array<uint16_t, kMaxReferenceDistance> size;
  uint32_t count = 0;
  uint32_t fruitless = 0;  // searches in a row that found nothing better than the previous record
};

// Searching the recent records costs the writer several times the rest of packing, and on a
// regular stream (one thread reading one file) it keeps finding the previous record. After
// kFruitlessSearches searches in a row that found nothing better (the previous record, or no
// record of the size at all), a type is searched once every kSearchEvery records (in between,
// the previous record is the reference when it has the size, else none), until a search finds
// a better one.
constexpr uint32_t kFruitlessSearches = 64;
constexpr uint32_t kSearchEvery = 16;

// A candidate reference `distance` records back from which `changed` body words differ, as a
// number whose minimum is the writer's choice. A reference other than the previous record costs
// one word more: it must save two words to be chosen. Saving one does not pay: on a regular
// stream (one thread, alternating CPUs) it breaks the periodicity zstd matches, and such a trace
// came out 75% larger than with the previous record (1.57 -> 2.80 bytes per event), while the
// mixes that gain (interleaved threads and files) save several words at a time. Among equals, the
// nearest.
constexpr uint64_t Score(uint64_t changed, size_t distance) {
  return ((changed + (distance > 1)) << 8) | distance;
}

// The reference-choosing kernels (codec 3): among the last `candidates` records of `recent` of
// the record's size, the one of lowest Score; UINT64_MAX when none has the size. Exact in both
// kernels, so both choose the same references. The minimum is taken without a branch on the
// comparison, which a random mix makes unpredictable.
uint64_t ChooseReferencePortable(const uint8_t* body, size_t words, uint16_t size,
                                 const RecentRecords& recent, size_t candidates) {
  uint64_t best = UINT64_MAX;
  for (size_t k = 1; k <= candidates; k++) {
    const size_t i = (recent.count - k) % kMaxReferenceDistance;
    if (recent.size[i] != size) continue;
    const uint8_t* ref = recent.body[i];
    uint64_t changed = 0;
    size_t w = 0;
    for (; w + 2 <= words; w += 2) {  // two words per load
      uint64_t a, b;
      std::memcpy(&a, body + 4 * w, 8);
      std::memcpy(&b, ref + 4 * w, 8);
      const uint64_t x = a ^ b;
      changed +=
          static_cast<uint64_t>((x & 0xffffffffu) != 0) + static_cast<uint64_t>((x >> 32) != 0);
    }
    if (w < words) changed += Load32(body + 4 * w) != Load32(ref + 4 * w);
    best = std::min<uint64_t>(best, Score(changed, k));
  }
  return best;
}

#ifdef IOTWIN_HAVE_AVX512_KERNEL
[[gnu::target("avx512f,popcnt")]] uint64_t ChooseReferenceAvx512(const uint8_t* body, size_t words,
                                                                 uint16_t size,
                                                                 const RecentRecords& recent,
                                                                 size_t candidates) {
  uint64_t best = UINT64_MAX;
  if (words <= 32) {
    // The usual case (a syscall record has 27 words): the body's two vectors loaded once.
    const auto keep_low = static_cast<__mmask16>(words >= 16 ? 0xffffu : (1u << words) - 1);
    const auto keep_high = static_cast<__mmask16>(words <= 16   ? 0u
                                                  : words == 32 ? 0xffffu
                                                                : (1u << (words - 16)) - 1);
    const __m512i low = _mm512_maskz_loadu_epi32(keep_low, body);
    const __m512i high = _mm512_maskz_loadu_epi32(keep_high, body + 64);
    for (size_t k = 1; k <= candidates; k++) {
      const size_t i = (recent.count - k) % kMaxReferenceDistance;
      if (recent.size[i] != size) continue;
      const uint8_t* ref = recent.body[i];
      const unsigned differ_low =
          _mm512_cmpneq_epi32_mask(low, _mm512_maskz_loadu_epi32(keep_low, ref));
      const unsigned differ_high =
          _mm512_cmpneq_epi32_mask(high, _mm512_maskz_loadu_epi32(keep_high, ref + 64));
      const uint64_t changed =
          static_cast<uint64_t>(std::popcount(differ_low | (differ_high << 16)));
      best = std::min<uint64_t>(best, Score(changed, k));
    }
    return best;
  }
  for (size_t k = 1; k <= candidates; k++) {
    const size_t i = (recent.count - k) % kMaxReferenceDistance;
    if (recent.size[i] != size) continue;
    const uint8_t* ref = recent.body[i];
    uint64_t changed = 0;
    for (size_t word = 0; word < words; word += 16) {
      const size_t n = std::min<size_t>(16, words - word);
      const auto keep = static_cast<__mmask16>(n == 16 ? 0xffffu : (1u << n) - 1);
      const __mmask16 differ =
          _mm512_cmpneq_epi32_mask(_mm512_maskz_loadu_epi32(keep, body + 4 * word),
                                   _mm512_maskz_loadu_epi32(keep, ref + 4 * word));
      changed += static_cast<uint64_t>(std::popcount(static_cast<unsigned>(differ)));
    }
    best = std::min<uint64_t>(best, Score(changed, k));
  }
  return best;
}
#endif

using PackWordsFn = uint8_t* (*)(const uint8_t*, const uint8_t*, size_t, uint8_t*, uint8_t*,
                                 uint64_t*);
using ChooseReferenceFn = uint64_t (*)(const uint8_t*, size_t, uint16_t, const RecentRecords&,
                                       size_t);

// Writes the prelude of `raw_len` record bytes at the start of `out`; returns where the packed
// records go.
uint8_t* StartPacked(std::vector<uint8_t>* out, size_t raw_len) {
  uint8_t* o = out->data();
  Store32(o, static_cast<uint32_t>(raw_len));
  Store32(o + 4, 0);
  return o + kPackedPreludeBytes;
}

// Reads the header of the record at `at` in `raw` into *h; false at the end of the records. The
// writer's records are whole and padded to 8 bytes; anything else would be a caller's bug, and
// packing stops there rather than read past the chunk (the unpacker then reports the records
// missing).
bool WholeRecordAt(const uint8_t* raw, size_t raw_len, size_t at, iot_rec_hdr* h) {
  if (raw_len - at < sizeof *h) return false;
  std::memcpy(h, raw + at, sizeof *h);
  return h->size >= sizeof *h && h->size % 4 == 0 && h->size <= raw_len - at;
}

template <PackWordsFn PackWords>
[[gnu::always_inline]] inline size_t PackWith(const uint8_t* raw, size_t raw_len,
                                              std::vector<uint8_t>* out) {
  uint8_t* o = StartPacked(out, raw_len);
  References refs;
  iot_rec_hdr h;
  for (size_t at = 0; WholeRecordAt(raw, raw_len, at, &h);) {
    const uint8_t* body = raw + at + sizeof h;
    const size_t words = (h.size - sizeof h) / 4;
    std::memcpy(o, &h, sizeof h);
    uint8_t* mask = o + sizeof h;
    const uint8_t* found = refs.Find(h.type, h.size);
    uint64_t first_bits;  // unused: codec 2 has no shape table
    o = PackWords(body, found ? found : kZeroBody, words, mask, mask + (words + 7) / 8,
                  &first_bits);
    refs.Set(h.type, h.size, body);
    at += h.size;
  }
  return static_cast<size_t>(o - out->data());
}

// Codec 3's packer state: the chunk's shapes (a record's header and mask), found by hash. A
// shape's first 16 bytes (all of it for records up to 388 bytes) are kept in its slot, so the
// usual lookup hashes and compares two words, with no call.
class ShapeIds {
 public:
  ShapeIds() { slots_.fill(Slot{}); }

  struct Key {
    uint64_t head[2] = {0, 0};  // the first 16 bytes, zero-padded
    uint64_t hash = 0;
    const uint8_t* bytes = nullptr;
    size_t len = 0;
  };
  // The key of the shape of header `h` and mask `bytes + 4`, `len` bytes in all, whose first 64
  // mask bits are `first_bits`. Shapes of up to 12 bytes (records of up to 64 body words) are
  // keyed from registers; longer ones read `bytes`, which must then have 16 readable bytes.
  static Key KeyOf(const iot_rec_hdr& h, uint64_t first_bits, const uint8_t* bytes, size_t len) {
    Key k;
    if (len <= 12) {
      uint32_t header;
      std::memcpy(&header, &h, sizeof header);
      k.head[0] = header | (first_bits << 32);
      k.head[1] = first_bits >> 32;
    } else {
      std::memcpy(k.head, bytes, sizeof k.head);
      if (len < 16) k.head[1] &= (uint64_t{1} << (8 * (len - 8))) - 1;
    }
    k.bytes = bytes;
    k.len = len;
    if (len <= sizeof k.head) {
      uint64_t h = (k.head[0] * 0x9e3779b97f4a7c15ull) ^ (k.head[1] * 0xc2b2ae3d27d4eb4full) ^ len;
      k.hash = h ^ (h >> 29);
    } else {
      k.hash = XXH3_64bits(bytes, len);
    }
    return k;
  }

  // The id of shape `k`, or -1; then *slot is where to add it.
  int Find(const Key& k, size_t* slot) const {
    for (size_t i = (k.hash >> 32) & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
      const Slot& s = slots_[i];
      if (s.id < 0) {
        *slot = i;
        return -1;
      }
      if (s.hash == k.hash && s.len == k.len && s.head[0] == k.head[0] && s.head[1] == k.head[1] &&
          (k.len <= sizeof k.head || std::memcmp(s.bytes, k.bytes, k.len) == 0)) {
        return s.id;
      }
    }
  }
  bool Full() const { return count_ >= kMaxShapes; }
  // `bytes` (the payload's own copy of the shape) must stay valid while the chunk is packed.
  void Add(size_t slot, const Key& k, const uint8_t* bytes) {
    slots_[slot] = Slot{{k.head[0], k.head[1]},
                        k.hash,
                        bytes,
                        static_cast<uint32_t>(k.len),
                        static_cast<int32_t>(count_++)};
  }

 private:
  static constexpr size_t kSlots = 512;  // over twice kMaxShapes: probes stay short
  struct Slot {
    uint64_t head[2] = {0, 0};
    uint64_t hash = 0;
    const uint8_t* bytes = nullptr;
    uint32_t len = 0;
    int32_t id = -1;
  };
  std::array<Slot, kSlots> slots_;
  size_t count_ = 0;
};

// Codec 3. Per record: a shape byte (an id, or kNewShape then the header and mask), for a
// referenced type a reference byte (0: none, k: the k-th previous record of the type), then the
// XORed words. The reference is the recent record of the type and size of lowest Score.
template <PackWordsFn PackWords, ChooseReferenceFn ChooseReference>
[[gnu::always_inline]] inline size_t PackShapedWith(const uint8_t* raw, size_t raw_len,
                                                    std::vector<uint8_t>* out) {
  uint8_t* o = StartPacked(out, raw_len);
  std::array<RecentRecords, kReferencedTypes> recent;
  ShapeIds shapes;
  // A record's header and mask (its shape), before it is placed (16 bytes at least: KeyOf).
  std::array<uint8_t, sizeof(iot_rec_hdr) + (UINT16_MAX / 4 + 7) / 8 + 16> shape;
  iot_rec_hdr h;
  for (size_t at = 0; WholeRecordAt(raw, raw_len, at, &h);) {
    const uint8_t* body = raw + at + sizeof h;
    const size_t words = (h.size - sizeof h) / 4;
    const size_t mask_bytes = (words + 7) / 8;
    const uint8_t* ref = kZeroBody;
    uint8_t distance = 0;
    if (h.type < kReferencedTypes) {
      RecentRecords& r = recent[h.type];
      const bool search = r.fruitless < kFruitlessSearches || r.count % kSearchEvery == 0;
      const uint64_t best = ChooseReference(
          body, words, h.size, r,
          search ? std::min<size_t>(r.count, kMaxReferenceDistance) : std::min<size_t>(r.count, 1));
      if (best != UINT64_MAX) {
        distance = static_cast<uint8_t>(best & 0xff);
        ref = r.body[(r.count - distance) % kMaxReferenceDistance];
      }
      if (search) r.fruitless = distance > 1 ? 0 : r.fruitless + 1;
      const size_t i = r.count % kMaxReferenceDistance;
      r.body[i] = body;
      r.size[i] = h.size;
      r.count++;
    }
    // The words go where they belong when the chunk already has the shape (the usual case)
    // and move up past the shape's bytes when it is new.
    const size_t reference_byte = h.type < kReferencedTypes ? 1 : 0;
    std::memcpy(shape.data(), &h, sizeof h);
    uint8_t* words_at = o + 1 + reference_byte;
    uint64_t first_bits;
    const uint8_t* words_end =
        PackWords(body, ref, words, shape.data() + sizeof h, words_at, &first_bits);
    const size_t words_len = static_cast<size_t>(words_end - words_at);
    const size_t shape_len = sizeof h + mask_bytes;
    const ShapeIds::Key key = ShapeIds::KeyOf(h, first_bits, shape.data(), shape_len);
    size_t slot = 0;
    const int id = shapes.Find(key, &slot);
    if (id >= 0) {
      *o++ = static_cast<uint8_t>(id);
    } else {
      std::memmove(words_at + shape_len, words_at, words_len);
      *o++ = kNewShape;
      std::memcpy(o, shape.data(), shape_len);
      if (!shapes.Full()) shapes.Add(slot, key, o);
      o += shape_len;
    }
    if (reference_byte) *o++ = distance;
    o += words_len;
    at += h.size;
  }
  return static_cast<size_t>(o - out->data());
}

#ifdef IOTWIN_HAVE_AVX512_KERNEL
[[gnu::target("avx512f,popcnt")]] size_t PackAvx512Records(const uint8_t* raw, size_t raw_len,
                                                           PackedLayout layout,
                                                           std::vector<uint8_t>* out) {
  if (layout == PackedLayout::kShaped) {
    return PackShapedWith<PackAvx512, ChooseReferenceAvx512>(raw, raw_len, out);
  }
  return PackWith<PackAvx512>(raw, raw_len, out);
}
#endif

}  // namespace

size_t PackRecords(const uint8_t* raw, size_t raw_len, size_t records, std::vector<uint8_t>* out,
                   PackedLayout layout, PackingKernel kernel) {
  const size_t bound = PackedBound(raw_len, records);
  if (out->size() < bound) out->resize(bound);
#ifdef IOTWIN_HAVE_AVX512_KERNEL
  if (kernel == PackingKernel::kAvx512 && PackingKernelSupported(kernel)) {
    return PackAvx512Records(raw, raw_len, layout, out);
  }
#endif
  (void)kernel;  // an unsupported kernel packs portably: the output is the same
  if (layout == PackedLayout::kShaped) {
    return PackShapedWith<PackPortable, ChooseReferencePortable>(raw, raw_len, out);
  }
  return PackWith<PackPortable>(raw, raw_len, out);
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
  kTornWords,
  kUnknownShape,   // codec 3
  kTornReference,  // codec 3
  kBadReference,   // codec 3
  kReferenceSize,  // codec 3
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

// Parses a header and word mask at payload byte `in` (a codec-2 record's start, a codec-3 new
// shape), `room` record bytes still to produce. Shared by both kernels and both layouts, so they
// accept and refuse exactly the same payloads. Sets rec->h, words and mask.
[[gnu::always_inline]] inline PackedProblem ParseShape(const uint8_t* packed, size_t packed_len,
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
  rec->words = words;
  rec->mask = mask;
  return PackedProblem::kNone;
}

// Parses the codec-2 record at payload byte `in`: its shape, then its words.
[[gnu::always_inline]] inline PackedProblem ParsePacked(const uint8_t* packed, size_t packed_len,
                                                        size_t in, size_t room, PackedRecord* rec) {
  if (PackedProblem p = ParseShape(packed, packed_len, in, room, rec); p != PackedProblem::kNone) {
    return p;
  }
  const size_t mask_bytes = (rec->words + 7) / 8;
  const uint8_t* end = packed + packed_len;
  const uint8_t* xored = rec->mask + mask_bytes;
  // Counting the mask's bits is needed only where the payload may end within the record's
  // words (its last records): elsewhere there is room for every word the mask could name.
  const size_t words_left = static_cast<size_t>(end - xored) / 4;
  if (words_left < rec->words && words_left < MaskPopcount(rec->mask, mask_bytes, end)) {
    return PackedProblem::kTornWords;
  }
  rec->xored = xored;
  return PackedProblem::kNone;
}

// `a` and `b` are the numbers a codec-3 problem names (see each case).
[[gnu::cold]] Status DescribeProblem(PackedProblem problem, const iot_rec_hdr& h, uint32_t record,
                                     size_t in, size_t out_len, const std::string& what,
                                     size_t a = 0, size_t b = 0) {
  switch (problem) {
    case PackedProblem::kTornHeader:
      return Status::Corrupt("{}: packed record {} at payload byte {}: torn header", what, record,
                             in);
    case PackedProblem::kBadSize:
      return Status::Corrupt(
          "{}: packed record {} at payload byte {}: size {} is not a multiple of 4 of at least 4",
          what, record, in, h.size);
    case PackedProblem::kOverrun:
      return Status::Corrupt(
          "{}: packed record {} at payload byte {}: its {} bytes overrun the {} record bytes "
          "promised",
          what, record, in, h.size, out_len);
    case PackedProblem::kTornMask:
      return Status::Corrupt("{}: packed record {} at payload byte {}: torn word mask", what,
                             record, in);
    case PackedProblem::kMaskBeyond:
      return Status::Corrupt(
          "{}: packed record {} at payload byte {}: its mask names words beyond the record's {}",
          what, record, in, (h.size - sizeof h) / 4);
    case PackedProblem::kTornWords:
      return Status::Corrupt("{}: packed record {} at payload byte {}: torn XORed words", what,
                             record, in);
    case PackedProblem::kUnknownShape:  // a: the id, b: shapes defined so far
      return Status::Corrupt(
          "{}: packed record {} at payload byte {}: shape {} is not defined (the chunk has "
          "defined {} so far)",
          what, record, in, a, b);
    case PackedProblem::kTornReference:
      return Status::Corrupt("{}: packed record {} at payload byte {}: torn reference byte", what,
                             record, in);
    case PackedProblem::kBadReference:  // a: the distance, b: the records it may reach
      return Status::Corrupt(
          "{}: packed record {} at payload byte {}: its reference is {} records of type {} back, "
          "but only {} can be (at most {}, within the chunk)",
          what, record, in, a, h.type, b, kMaxReferenceDistance);
    case PackedProblem::kReferenceSize:  // a: the reference's size
      return Status::Corrupt(
          "{}: packed record {} at payload byte {}: its reference has {} bytes, the record {}",
          what, record, in, a, h.size);
    case PackedProblem::kNone:
      break;
  }
  return Status::Internal("{}: packed record {}: no problem to describe", what, record);
}

// The kernels: `ref` is the reference body (kZeroBody for none); each returns the end of the
// record's XORed words.

// Portable kernel: the reference body copied, then each changed word XORed in.
[[gnu::always_inline]] inline const uint8_t* ApplyPortable(const PackedRecord& rec,
                                                           const uint8_t* ref, uint8_t* body) {
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
[[gnu::target("avx512f,popcnt")]] inline const uint8_t* ApplyAvx512(const PackedRecord& rec,
                                                                    const uint8_t* ref,
                                                                    uint8_t* body) {
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

// The prelude promises the record bytes the caller expects.
Status CheckPrelude(const uint8_t* packed, size_t packed_len, size_t out_len,
                    const std::string& what) {
  IOTWIN_ASSIGN_OR_RETURN(uint32_t expect, PackedRecordsLength(packed, packed_len, what));
  if (expect != out_len) {
    return Status::Corrupt("{}: packed payload holds {} record bytes, {} expected", what, expect,
                           out_len);
  }
  return Status::Ok();
}

// The record count once the payload is used up: an error if it produced fewer bytes than promised.
Result<uint32_t> Finished(uint32_t records, size_t produced, size_t out_len,
                          const std::string& what) {
  if (produced != out_len) {
    return Status::Corrupt("{}: packed payload ends after {} of its {} record bytes", what,
                           produced, out_len);
  }
  return records;
}

template <const uint8_t* (*Apply)(const PackedRecord&, const uint8_t*, uint8_t*)>
[[gnu::always_inline]] inline Result<uint32_t> UnpackWith(const uint8_t* packed, size_t packed_len,
                                                          uint8_t* out, size_t out_len,
                                                          const std::string& what) {
  IOTWIN_RETURN_IF_ERROR(CheckPrelude(packed, packed_len, out_len, what));
  References refs;
  size_t in = kPackedPreludeBytes;
  size_t produced = 0;
  uint32_t records = 0;
  while (in < packed_len) {
    PackedRecord rec;
    const PackedProblem problem = ParsePacked(packed, packed_len, in, out_len - produced, &rec);
    if (problem != PackedProblem::kNone) {
      return DescribeProblem(problem, rec.h, records, in, out_len, what);
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
  return Finished(records, produced, out_len, what);
}

// Codec 3's unpacker state: the chunk's shapes, and where the last records of each referenced
// type start in the output.
struct Shape {
  iot_rec_hdr h;
  uint32_t words;   // body words
  uint32_t stored;  // XORed words that follow: the mask's set bits
  const uint8_t* mask;
};

struct RecentOffsets {
  std::array<uint32_t, kMaxReferenceDistance> at;
  uint32_t count;
};

template <const uint8_t* (*Apply)(const PackedRecord&, const uint8_t*, uint8_t*)>
[[gnu::always_inline]] inline Result<uint32_t> UnpackShapedWith(const uint8_t* packed,
                                                                size_t packed_len, uint8_t* out,
                                                                size_t out_len,
                                                                const std::string& what) {
  IOTWIN_RETURN_IF_ERROR(CheckPrelude(packed, packed_len, out_len, what));
  std::array<Shape, kMaxShapes> shapes;  // the first shape_count are defined
  size_t shape_count = 0;
  std::array<RecentOffsets, kReferencedTypes> recent;
  for (RecentOffsets& r : recent) r.count = 0;
  const uint8_t* const end = packed + packed_len;
  size_t in = kPackedPreludeBytes;
  size_t produced = 0;
  uint32_t records = 0;
  while (in < packed_len) {
    const size_t start = in;
    const uint8_t id = packed[in++];
    Shape fresh;
    const Shape* shape = &fresh;
    if (id == kNewShape) {
      PackedRecord rec;
      const PackedProblem problem = ParseShape(packed, packed_len, in, out_len - produced, &rec);
      if (problem != PackedProblem::kNone) {
        return DescribeProblem(problem, rec.h, records, start, out_len, what);
      }
      const size_t mask_bytes = (rec.words + 7) / 8;
      fresh = Shape{rec.h, static_cast<uint32_t>(rec.words),
                    static_cast<uint32_t>(MaskPopcount(rec.mask, mask_bytes, end)), rec.mask};
      if (shape_count < kMaxShapes) shapes[shape_count++] = fresh;
      in += sizeof rec.h + mask_bytes;
    } else {
      if (id >= shape_count) {
        return DescribeProblem(PackedProblem::kUnknownShape, {}, records, start, out_len, what, id,
                               shape_count);
      }
      shape = &shapes[id];
      if (shape->h.size > out_len - produced) {
        return DescribeProblem(PackedProblem::kOverrun, shape->h, records, start, out_len, what);
      }
    }
    const uint8_t* ref = kZeroBody;
    if (shape->h.type < kReferencedTypes) {
      if (in >= packed_len) {
        return DescribeProblem(PackedProblem::kTornReference, shape->h, records, start, out_len,
                               what);
      }
      const size_t distance = packed[in++];
      RecentOffsets& r = recent[shape->h.type];
      if (distance != 0) {
        const size_t reachable = std::min<size_t>(r.count, kMaxReferenceDistance);
        if (distance > reachable) {
          return DescribeProblem(PackedProblem::kBadReference, shape->h, records, start, out_len,
                                 what, distance, reachable);
        }
        const uint32_t ref_at = r.at[(r.count - distance) % kMaxReferenceDistance];
        iot_rec_hdr ref_h;
        std::memcpy(&ref_h, out + ref_at, sizeof ref_h);
        if (ref_h.size != shape->h.size) {
          return DescribeProblem(PackedProblem::kReferenceSize, shape->h, records, start, out_len,
                                 what, ref_h.size);
        }
        ref = out + ref_at + sizeof ref_h;
      }
      r.at[r.count % kMaxReferenceDistance] = static_cast<uint32_t>(produced);
      r.count++;
    }
    if ((packed_len - in) / 4 < shape->stored) {
      return DescribeProblem(PackedProblem::kTornWords, shape->h, records, start, out_len, what);
    }
    uint8_t* dst = out + produced;
    std::memcpy(dst, &shape->h, sizeof shape->h);
    const PackedRecord rec{shape->h, shape->words, shape->mask, packed + in};
    const uint8_t* next = Apply(rec, ref, dst + sizeof shape->h);
    produced += shape->h.size;
    in = static_cast<size_t>(next - packed);
    records++;
  }
  return Finished(records, produced, out_len, what);
}

#ifdef IOTWIN_HAVE_AVX512_KERNEL
[[gnu::target("avx512f,popcnt")]] Result<uint32_t> UnpackAvx512(const uint8_t* packed,
                                                                size_t packed_len,
                                                                PackedLayout layout, uint8_t* out,
                                                                size_t out_len,
                                                                const std::string& what) {
  if (layout == PackedLayout::kShaped) {
    return UnpackShapedWith<ApplyAvx512>(packed, packed_len, out, out_len, what);
  }
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

Result<uint32_t> UnpackRecords(const uint8_t* packed, size_t packed_len, PackedLayout layout,
                               uint8_t* out, size_t out_len, const std::string& what,
                               PackingKernel kernel) {
  if (!PackingKernelSupported(kernel)) {
    return Status::Unsupported("{}: this CPU cannot run the {} unpacking kernel", what,
                               kernel == PackingKernel::kAvx512 ? "AVX-512" : "portable");
  }
#ifdef IOTWIN_HAVE_AVX512_KERNEL
  if (kernel == PackingKernel::kAvx512) {
    return UnpackAvx512(packed, packed_len, layout, out, out_len, what);
  }
#endif
  if (layout == PackedLayout::kShaped) {
    return UnpackShapedWith<ApplyPortable>(packed, packed_len, out, out_len, what);
  }
  return UnpackWith<ApplyPortable>(packed, packed_len, out, out_len, what);
}

PackingKernel FastestPackingKernel() {
  static const PackingKernel fastest = PackingKernelSupported(PackingKernel::kAvx512)
                                           ? PackingKernel::kAvx512
                                           : PackingKernel::kPortable;
  return fastest;
}

}  // namespace iotwin
