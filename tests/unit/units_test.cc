// Sizes and durations typed on the command line (base/units.h).
#include "base/units.h"

#include <gtest/gtest.h>

namespace iotwin::units {
namespace {

uint64_t Size(std::string_view text, uint64_t plain = 1) {
  auto r = ParseSizeBytes(text, plain);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().message();
  return r.ok() ? *r : 0;
}

TEST(Units, SizesUseBinaryMultiplesLikeFio) {
  EXPECT_EQ(Size("4096"), 4096u);
  EXPECT_EQ(Size("4k"), 4096u);
  EXPECT_EQ(Size("4K"), 4096u);
  EXPECT_EQ(Size("4KiB"), 4096u);
  EXPECT_EQ(Size("4kb"), 4096u);
  EXPECT_EQ(Size("1M"), 1u << 20);
  EXPECT_EQ(Size("2G"), 2ull << 30);
  EXPECT_EQ(Size("1.5G"), 3ull << 29);
  EXPECT_EQ(Size("3T"), 3ull << 40);
  EXPECT_EQ(Size("7b"), 7u);
  EXPECT_EQ(Size(" 64 M "), 64u << 20);
  EXPECT_EQ(Size("0x100000"), 1u << 20);
  EXPECT_EQ(Size("0.5k"), 512u);
  // Exact, not through a double: 1.1T is 1209462790553.6 bytes (refused), 1.25T is whole.
  EXPECT_EQ(Size("1.25T"), 5ull << 38);
}

TEST(Units, APlainNumberKeepsTheOptionsUnit) {
  EXPECT_EQ(Size("64", 1 << 20), 64u << 20);
  EXPECT_EQ(Size("512k", 1 << 20), 512u << 10);
}

TEST(Units, BadSizesSayWhy) {
  for (std::string_view bad : {"", "k", "-4k", "4x", "4kk", "4 kilo", "0.3", "1.5b", "1.1T",
                               "0.99999999999999999999", "0x", "0xg", "1e3"}) {
    auto r = ParseSizeBytes(bad, 1);
    EXPECT_FALSE(r.ok()) << bad;
  }
  auto unknown = ParseSizeBytes("4x", 1);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown unit 'x'"), std::string::npos);
}

TEST(Units, SizesThatOverflowAreRefused) {
  EXPECT_FALSE(ParseSizeBytes("18446744073709551616", 1).ok());
  EXPECT_FALSE(ParseSizeBytes("16384P", 1).ok());
  EXPECT_TRUE(ParseSizeBytes("18446744073709551615", 1).ok());
}

TEST(Units, Durations) {
  auto ns = [](std::string_view t, double plain = 1e9) {
    auto r = ParseDurationNs(t, plain);
    EXPECT_TRUE(r.ok()) << t << ": " << r.status().message();
    return r.ok() ? *r : -1;
  };
  EXPECT_DOUBLE_EQ(ns("500ms"), 5e8);
  EXPECT_DOUBLE_EQ(ns("10s"), 1e10);
  EXPECT_DOUBLE_EQ(ns("2m"), 1.2e11);
  EXPECT_DOUBLE_EQ(ns("2min"), 1.2e11);
  EXPECT_DOUBLE_EQ(ns("100us"), 1e5);
  EXPECT_DOUBLE_EQ(ns("250ns"), 250);
  EXPECT_DOUBLE_EQ(ns("1h"), 3.6e12);
  EXPECT_DOUBLE_EQ(ns("0.1s"), 1e8);
  EXPECT_DOUBLE_EQ(ns("1.5"), 1.5e9);
  EXPECT_DOUBLE_EQ(ns("50", 1e3), 5e4);
  EXPECT_DOUBLE_EQ(ns("1e3"), 1e12);
  EXPECT_DOUBLE_EQ(ns("5e1us"), 5e4);
  EXPECT_DOUBLE_EQ(ns("3\xce\xbcs"), 3e3);
}

TEST(Units, BadDurationsSayWhy) {
  for (std::string_view bad : {"", "s", "-1s", "10 sec", "5d", "inf", "nan", "0x10", "1e400"}) {
    EXPECT_FALSE(ParseDurationNs(bad, 1e9).ok()) << bad;
  }
}

}  // namespace
}  // namespace iotwin::units
