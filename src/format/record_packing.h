// XOR packing of a chunk's records, the transform behind chunk codec 2 (layout::kCodecZstdPacked,
// docs/trace-format.md "Packed chunks"). Consecutive records of one type differ in few 32-bit
// words (a timestamp, an offset, a duration), so each record is stored as its header, a bit mask
// of the words that differ from the previous record of its type in the chunk, and those words
// XORed with it. A 112-byte syscall record packs to about 30 bytes. zstd then has a quarter of
// the bytes to compress and to produce: decompressing them and unpacking costs about half of
// decompressing the plain records, and that is the report's largest cost.
//
// Each chunk packs on its own, so chunks stay independently readable (seeks by time and
// salvage of damaged traces).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace iotwin {

// Bytes before the packed records in a decompressed payload: u32 length of the unpacked
// records, u32 reserved (0).
inline constexpr size_t kPackedPreludeBytes = 8;

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
// writer pads them to 8) into the start of `out`: prelude, then packed records. Returns the
// packed length. `out` is grown to PackedBound when smaller and never shrunk, so a buffer reused
// for every chunk is not zero-filled again each time.
size_t PackRecords(const uint8_t* raw, size_t raw_len, size_t records, std::vector<uint8_t>* out);
// PackRecords with a given kernel (tests and benchmarks); an unsupported one packs portably.
size_t PackRecords(const uint8_t* raw, size_t raw_len, size_t records, std::vector<uint8_t>* out,
                   PackingKernel kernel);

// Reads the unpacked length from a packed payload's prelude; `what` names the payload in errors.
Result<uint32_t> PackedRecordsLength(const uint8_t* packed, size_t packed_len,
                                     const std::string& what);

// Unpacks a payload written by PackRecords into `out` (`out_len` bytes, the prelude's length).
// Every bound is checked: a damaged payload is an error naming the packed record and its byte
// offset in the payload, never a read or write outside the buffers. Returns the record count.
// Uses the fastest kernel this CPU runs.
Result<uint32_t> UnpackRecords(const uint8_t* packed, size_t packed_len, uint8_t* out,
                               size_t out_len, const std::string& what);

// UnpackRecords with a given kernel (tests and benchmarks); an unsupported one is an error.
Result<uint32_t> UnpackRecords(const uint8_t* packed, size_t packed_len, uint8_t* out,
                               size_t out_len, const std::string& what, PackingKernel kernel);

}  // namespace iotwin
