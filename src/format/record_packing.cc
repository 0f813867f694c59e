#include "format/record_packing.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

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

void PackRecords(const uint8_t* raw, size_t raw_len, size_t records, std::vector<uint8_t>* out) {
  out->resize(PackedBound(raw_len, records));
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
    const size_t mask_bytes = (words + 7) / 8;
    o = mask + mask_bytes;
    const uint8_t* found = refs.Find(h.type, h.size);
    const uint8_t* ref = found ? found : kZeroBody;
    // Branch-free: every word is stored, and the output advances past the non-zero ones only
    // (PackedBound leaves room for all of them).
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
    refs.Set(h.type, h.size, body);
    at += h.size;
  }
  out->resize(static_cast<size_t>(o - out->data()));
}

Result<uint32_t> PackedRecordsLength(const uint8_t* packed, size_t packed_len,
                                     const std::string& what) {
  if (packed_len < kPackedPreludeBytes) {
    return Status::Corrupt("{}: packed payload of {} bytes is shorter than its {}-byte prelude",
                           what, packed_len, kPackedPreludeBytes);
  }
  return Load32(packed);
}

Result<uint32_t> UnpackRecords(const uint8_t* packed, size_t packed_len, uint8_t* out,
                               size_t out_len, const std::string& what) {
  IOTWIN_ASSIGN_OR_RETURN(uint32_t expect, PackedRecordsLength(packed, packed_len, what));
  if (expect != out_len) {
    return Status::Corrupt("{}: packed payload holds {} record bytes, {} expected", what, expect,
                           out_len);
  }
  References refs;
  const uint8_t* const end = packed + packed_len;
  size_t in = kPackedPreludeBytes;
  size_t produced = 0;
  uint32_t records = 0;
  while (in < packed_len) {
    iot_rec_hdr h;
    if (packed_len - in < sizeof h) {
      return Status::Corrupt("{}: packed record {} at payload byte {}: torn header", what,
                             records, in);
    }
    std::memcpy(&h, packed + in, sizeof h);
    if (h.size < sizeof h || h.size % 4 != 0) {
      return Status::Corrupt(
          "{}: packed record {} at payload byte {}: size {} is not a multiple of 4 of at least 4",
          what, records, in, h.size);
    }
    if (h.size > out_len - produced) {
      return Status::Corrupt(
          "{}: packed record {} at payload byte {}: its {} bytes overrun the {} record bytes "
          "promised",
          what, records, in, h.size, out_len);
    }
    const size_t words = (h.size - sizeof h) / 4;
    const size_t mask_bytes = (words + 7) / 8;
    const uint8_t* mask = packed + in + sizeof h;
    if (packed_len - in - sizeof h < mask_bytes) {
      return Status::Corrupt("{}: packed record {} at payload byte {}: torn word mask", what,
                             records, in);
    }
    if (words % 8 != 0 && (mask[mask_bytes - 1] >> (words % 8)) != 0) {
      return Status::Corrupt(
          "{}: packed record {} at payload byte {}: its mask names words beyond the record's {}",
          what, records, in, words);
    }
    uint8_t* dst = out + produced;
    std::memcpy(dst, &h, sizeof h);
    uint8_t* body = dst + sizeof h;
    const uint8_t* ref = refs.Find(h.type, h.size);
    if (ref) {
      std::memcpy(body, ref, h.size - sizeof h);
    } else {
      std::memset(body, 0, h.size - sizeof h);
    }
    // The mask is read 64 words at a time; the XORed words follow it. When the payload holds
    // enough bytes for every word of the record, the per-word bound check is skipped.
    const uint8_t* x = mask + mask_bytes;
    const bool room_for_all = static_cast<size_t>(end - x) >= 4 * words;
    for (size_t group = 0; group < mask_bytes; group += 8) {
      const size_t n = std::min<size_t>(8, mask_bytes - group);
      uint64_t bits = 0;
      if (end - (mask + group) >= 8) {  // one load, the bytes past the mask cleared
        std::memcpy(&bits, mask + group, 8);
        if (n < 8) bits &= (uint64_t{1} << (8 * n)) - 1;
      } else {
        std::memcpy(&bits, mask + group, n);
      }
      uint8_t* const group_body = body + 32 * group;
      if (room_for_all) {
        for (; bits != 0; bits &= bits - 1) {
          uint8_t* word = group_body + 4 * static_cast<size_t>(std::countr_zero(bits));
          Store32(word, Load32(word) ^ Load32(x));
          x += 4;
        }
        continue;
      }
      for (; bits != 0; bits &= bits - 1) {
        if (end - x < 4) {
          return Status::Corrupt("{}: packed record {} at payload byte {}: torn XORed words",
                                 what, records, in);
        }
        uint8_t* word = group_body + 4 * static_cast<size_t>(std::countr_zero(bits));
        Store32(word, Load32(word) ^ Load32(x));
        x += 4;
      }
    }
    refs.Set(h.type, h.size, body);
    produced += h.size;
    in = static_cast<size_t>(x - packed);
    records++;
  }
  if (produced != out_len) {
    return Status::Corrupt("{}: packed payload ends after {} of its {} record bytes", what,
                           produced, out_len);
  }
  return records;
}

}  // namespace iotwin
