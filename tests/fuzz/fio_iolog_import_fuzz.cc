// libFuzzer target: the fio iolog importer on arbitrary bytes (see import_fuzz_util.h).
#include "import_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return iotwin::interop::fuzz::Run(iotwin::interop::ImportFormat::kFioIolog, data, size);
}
