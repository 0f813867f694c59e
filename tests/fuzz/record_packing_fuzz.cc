// libFuzzer target: UnpackRecords (chunk codecs 2 and 3: each input is unpacked in both layouts)
// must never read or write outside its buffers on any decompressed payload, and a payload it
// accepts must pack back to the same records. Where the CPU has both kernels, they must agree on
// every input (the same records or the same error when unpacking, the same bytes when packing).
// The trace reader's checksums keep mutated files from reaching the unpacker, hence this
// target on the payload itself. Seeds: tests/fuzz/seeds/record_packing_fuzz/.
#include <cstdint>
#include <cstring>
#include <vector>

#include "format/record_packing.h"

namespace {

void FuzzLayout(const uint8_t* data, size_t size, uint32_t len, iotwin::PackedLayout layout) {
  using iotwin::PackingKernel;
  std::vector<uint8_t> out(len);  // exact size: ASan reports any overrun (of the portable
                                  // kernel: sanitizers do not see masked AVX-512 accesses)
  auto records = iotwin::UnpackRecords(data, size, layout, out.data(), out.size(), "fuzz",
                                       PackingKernel::kPortable);
  const bool vector = iotwin::PackingKernelSupported(PackingKernel::kAvx512);
  if (vector) {
    std::vector<uint8_t> vector_out(len);
    auto vector_records = iotwin::UnpackRecords(data, size, layout, vector_out.data(),
                                                vector_out.size(), "fuzz", PackingKernel::kAvx512);
    if (vector_records.ok() != records.ok()) __builtin_trap();
    if (records.ok() && (*vector_records != *records || vector_out != out)) __builtin_trap();
    if (!records.ok() && vector_records.status().message() != records.status().message())
      __builtin_trap();
  }
  if (!records.ok()) return;
  // What unpacked must pack and unpack to itself.
  std::vector<uint8_t> again;
  again.resize(iotwin::PackRecords(out.data(), out.size(), *records, &again, layout,
                                   PackingKernel::kPortable));
  if (vector) {
    std::vector<uint8_t> vector_again;
    vector_again.resize(iotwin::PackRecords(out.data(), out.size(), *records, &vector_again, layout,
                                            PackingKernel::kAvx512));
    if (vector_again != again) __builtin_trap();  // the kernels pack to the same bytes
  }
  std::vector<uint8_t> back(out.size());
  auto twice =
      iotwin::UnpackRecords(again.data(), again.size(), layout, back.data(), back.size(), "again");
  if (!twice.ok() || *twice != *records || back != out) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto len = iotwin::PackedRecordsLength(data, size, "fuzz");
  if (!len.ok() || *len > (1u << 20)) return 0;
  FuzzLayout(data, size, *len, iotwin::PackedLayout::kPrevious);
  FuzzLayout(data, size, *len, iotwin::PackedLayout::kShaped);
  return 0;
}
