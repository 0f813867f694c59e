// On-disk framing of trace format v1: file header, chunk header, trailer, footer.
// docs/trace-format.md describes each byte; keep the two in step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <xxhash.h>

namespace iotwin::layout {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "trace format v1 is little-endian; this build would need byte swapping");

// 0x89 detects 7-bit transports, \r\n detects line-ending conversion, 0x1a stops `type` on DOS.
inline constexpr uint8_t kFileMagic[8] = {0x89, 'I', 'O', 'T', 'W', '\r', '\n', 0x1a};
inline constexpr uint16_t kMajor = 1;
// Minor 1 added chunk codec 2 (kCodecZstdPacked), minor 2 codec 3 (kCodecZstdShaped); older
// readers reject such chunks by codec, never misread them. Minor 3 added the FDLIST record
// type, which older readers skip as unknown (and count).
inline constexpr uint16_t kMinor = 3;

struct FileHeader {
  uint8_t magic[8];
  uint16_t major;
  uint16_t minor;
  uint32_t flags;     // none defined in v1; readers ignore unknown bits
  uint32_t meta_len;  // bytes of the JSON metadata that follows the header
  uint32_t reserved;
  uint64_t hash;  // XXH3-64 of bytes [0, 24) of this header followed by the metadata
};
static_assert(sizeof(FileHeader) == 32);

inline constexpr uint32_t kChunkMagic = 0x4b4e4843;  // "CHNK"
inline constexpr uint16_t kCodecNone = 0;
inline constexpr uint16_t kCodecZstd = 1;
// zstd of the XOR-packed records (format/record_packing.h): codec 2 was written by format 1.1,
// codec 3 (chosen references, shape ids) is written since 1.2.
inline constexpr uint16_t kCodecZstdPacked = 2;
inline constexpr uint16_t kCodecZstdShaped = 3;
inline constexpr uint16_t kChunkHasStrings = 1;  // chunk flag: holds STRING records

struct ChunkHeader {
  uint32_t magic;
  uint32_t seq;  // 0, 1, 2, ... in file order
  uint32_t records;
  uint32_t raw_len;   // payload bytes after decompression
  uint32_t comp_len;  // payload bytes on disk
  uint16_t codec;
  uint16_t flags;
  uint64_t min_ts;  // smallest and largest record timestamp (0, 0 when none has one)
  uint64_t max_ts;
  uint64_t payload_hash;  // XXH3-64 of the on-disk payload
  uint64_t header_hash;   // XXH3-64 of bytes [0, 48) of this header
};
static_assert(sizeof(ChunkHeader) == 56);

inline constexpr uint32_t kTrailerMagic = 0x524c5254;  // "TRLR"
struct TrailerHeader {
  uint32_t magic;
  uint32_t entries;      // index entries that follow (IndexEntry each)
  uint32_t summary_len;  // bytes of the JSON summary after the entries
  uint32_t reserved;
};
static_assert(sizeof(TrailerHeader) == 16);

struct IndexEntry {
  uint64_t offset;
  uint64_t min_ts;
  uint64_t max_ts;
  uint32_t records;
  uint32_t flags;  // the chunk's flags
};
static_assert(sizeof(IndexEntry) == 32);

inline constexpr uint8_t kFooterMagic[8] = {'I', 'O', 'T', 'W', 'E', 'N', 'D', 0};
struct Footer {
  uint8_t magic[8];
  uint64_t trailer_offset;
  uint64_t trailer_len;
  uint64_t hash;  // XXH3-64 of the trailer followed by bytes [0, 24) of this footer
};
static_assert(sizeof(Footer) == 32);

inline uint64_t HashChunkHeader(const ChunkHeader& h) {
  return XXH3_64bits(&h, offsetof(ChunkHeader, header_hash));
}

}  // namespace iotwin::layout
