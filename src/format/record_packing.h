// XOR packing of a chunk's records, the transform behind chunk codecs 2 and 3
// (docs/trace-format.md "Packed chunks"). Records of one type differ in few 32-bit words (a
// timestamp, an offset, a duration), so each record is stored as the words that differ from a
// reference record of its type, XORed with it, and a bit mask of which words those are. A
// 112-byte syscall record packs to 15-30 bytes. zstd then has a fifth to a quarter of the bytes
// to compress and to produce: decompressing them and unpacking costs well under half of
// decompressing the plain records, and that is the report's largest cost.
//
// Two layouts, one per codec:
//   codec 2 (format 1.1): the reference is the previous record of the type; each record is its
//     header, its mask, its words.
//   codec 3 (format 1.2, written since): the packer picks the reference among the last 16
//     records of the type (the previous one unless another leaves two words fewer), and a
//     record's header and mask, which repeat, are stored once per chunk and then named by a
//     one-byte shape id. zstd decodes fewer sequences: about 35% fewer instructions per record
//     on the training-like mix.
//
// Each chunk packs on its own, so chunks stay independently readable (seeks by time and
// salvage of damaged traces).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/layout.h"

namespace iotwin {

// Bytes before the packed records in a decompressed payload: u32 length of the unpacked
// records, u32 reserved (0).
inline constexpr size_t kPackedPreludeBytes = 8;

// The packed layouts, numbered as the chunk codecs that use them.
enum class PackedLayout : uint16_t {
  kPrevious = layout::kCodecZstdPacked,  // codec 2: reference = the previous record of the type
  kShaped = layout::kCodecZstdShaped,    // codec 3: chosen reference, shape ids
};

// Codec 3: how far back a reference may be (records of the same type), and how many shapes a
// chunk's table holds (ids 0..254; the byte 255 introduces a shape).
inline constexpr size_t kMaxReferenceDistance = 16;
inline constexpr size_t kMaxShapes = 255;

// Largest packed payload (prelude included) of `raw_len` bytes of `records` records.
size_t PackedBound(size_t raw_len, size_t records);

// The packing and unpacking kernels. They differ only in how a record's body words are
// compared and applied: one word at a time (portable), or 16 per instruction (x86-64 CPUs with
// AVX-512F, chosen at run time): a compress (vpcompressd) gathers the changed words when
// packing, an expanding load (vpexpandd) puts them back when unpacking. Both produce the same
// bytes, and share the parsing and every bound check, so they accept and refuse the same
// payloads with the same errors.
enum class PackingKernel { kPortable, kAvx512 };
bool PackingKernelSupported(PackingKernel kernel);
PackingKernel FastestPackingKernel();  // what PackRecords and UnpackRecords use by default

// Packs the records of `raw` (`raw_len` bytes, each record's size a multiple of 4, as the
// writer pads them to 8) into the start of `out` in `layout`: prelude, then packed records.
// Returns the packed length. `out` is grown to PackedBound when smaller and never shrunk, so a
// buffer reused for every chunk is not zero-filled again each time. An unsupported `kernel`
// packs portably (tests and benchmarks choose one; every kernel writes the same bytes).
size_t PackRecords(const uint8_t* raw, size_t raw_len, size_t records, std::vector<uint8_t>* out,
                   PackedLayout layout = PackedLayout::kShaped,
                   PackingKernel kernel = FastestPackingKernel());

// Reads the unpacked length from a packed payload's prelude; `what` names the payload in errors.
Result<uint32_t> PackedRecordsLength(const uint8_t* packed, size_t packed_len,
                                     const std::string& what);

// Unpacks a payload written by PackRecords in `layout` into `out` (`out_len` bytes, the
// prelude's length). Every bound is checked: a damaged payload is an error naming the packed
// record and its byte offset in the payload, never a read or write outside the buffers. Returns
// the record count. An unsupported `kernel` is an error.
Result<uint32_t> UnpackRecords(const uint8_t* packed, size_t packed_len, PackedLayout layout,
                               uint8_t* out, size_t out_len, const std::string& what,
                               PackingKernel kernel = FastestPackingKernel());

}  // namespace iotwin
