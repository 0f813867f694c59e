// Helpers for the tests that feed the interop layer untrusted names and traces.
#pragma once

#include <fcntl.h>

#include <cstdint>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "format/records.h"
#include "interop/anonymize.h"
#include "interop_test_util.h"

namespace iotwin::interop::testing {

// True when `s` parses as JSON (nlohmann refuses invalid UTF-8).
inline bool ParsesAsJson(const std::string& s) { return nlohmann::json::accept(s); }

// Strict UTF-8 check (no overlongs, surrogates or code points past U+10FFFF).
inline bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    auto b = static_cast<unsigned char>(s[i]);
    size_t n = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || n > s.size() - i) return false;
    uint32_t cp = n == 1 ? b : b & (0x7F >> n);
    for (size_t k = 1; k < n; k++) {
      auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n;
  }
  return true;
}

inline Anonymizer MakeTestAnonymizer() {
  auto a = Anonymizer::FromKey("0123456789abcdef0123456789abcdef", {});
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return std::move(*a);
}

// A name holding every kind of awkward byte: not UTF-8, CSV and TSV separators, a quote, a
// line break, a backslash, a control character.
inline const std::string kAwkwardName = "/data/a\xff\xfe,b\"c\td\ne\\f\x01.bin";

// A trace whose names hold every kind of awkward byte, written directly.
inline void WriteAwkwardTrace(const std::string& path, const std::string& name) {
  ::iotwin::test::TraceBuilder b(nlohmann::json::object());
  b.Add(b.ProcRecord(IOT_PROC_EXEC, 1, 10, 10, "co\xffmm\n", b.Str(name)));
  auto& o = b.Call(IOT_OP_OPENAT, 1000, 10, 10, AT_FDCWD, 3);
  o.path_id = b.Str(name);
  auto& r = b.Call(IOT_OP_READ, 2000, 10, 10, 3, 4096);
  r.length = 4096;
  r.path_id = 0;
  iot_intent in{};
  InitRecord(&in, IOT_REC_INTENT);
  in.kind = IOT_INTENT_INSTANT;
  in.ts = 3000;
  in.tgid = 10;
  in.tid = 10;
  in.label_id = b.Str("lab\xfe\"el");
  b.Add(in);
  EXPECT_TRUE(b.WriteFile(path, nlohmann::json::object()).ok());
}

}  // namespace iotwin::interop::testing
