// interop::ColumnTable: the in-memory tables of the Python module (python/), written by the
// export's row functions through ColumnRowWriter.
#include "interop/table_columns.h"

#include <cstring>

#include <gtest/gtest.h>

namespace iotwin::interop {
namespace {

template <typename T>
T At(const Column& c, size_t row) {
  T v;
  std::memcpy(&v, c.data.get() + row * sizeof v, sizeof v);
  return v;
}

TEST(TableColumns, FieldsBecomeTypedColumnsAndTextCodes) {
  ColumnQuery query;
  ColumnTable t("syscalls", &query);
  const std::string paths[] = {"/a", "/b", "/a"};
  for (uint32_t i = 0; i < 3000; i++) {  // past the first allocation: the columns grow
    auto w = t.Begin();
    w.U("ts_ns", uint64_t{1000} + i);
    w.I("fd", int32_t(i % 3) - 1);
    w.Word("op", i % 2 ? "read" : "write");
    w.S("path", paths[i % 3], &t.scratch());
    w.File("file_id", i % 2 ? UINT32_MAX : i);
    t.End(w);
  }
  ASSERT_EQ(t.rows(), 3000u);
  ASSERT_FALSE(t.mismatched());
  const auto& c = t.columns();
  ASSERT_EQ(c.size(), 5u);
  EXPECT_EQ(c[0].width, 8);
  EXPECT_EQ(c[1].width, 4);
  EXPECT_EQ(c[1].kind, Column::Kind::kSigned);
  EXPECT_EQ(At<uint64_t>(c[0], 2999), 3999u);
  EXPECT_EQ(At<int32_t>(c[1], 0), -1);
  EXPECT_EQ(c[2].dictionary.size(), 2u);
  EXPECT_EQ(c[2].dictionary[At<uint32_t>(c[2], 1)], "read");
  EXPECT_EQ(c[3].dictionary.size(), 2u);  // "/a" stored once
  EXPECT_EQ(c[3].dictionary[At<uint32_t>(c[3], 2)], "/a");
  EXPECT_EQ(At<int64_t>(c[4], 1), -1);
  EXPECT_EQ(At<int64_t>(c[4], 2998), 2998);
}

TEST(TableColumns, QueryKeepsColumnsAndRowsAskedFor) {
  ColumnQuery query;
  query.columns = {"length"};
  query.ops = {"read"};
  query.ts_from = 10;
  query.ts_to = 20;
  ColumnTable t("syscalls", &query);
  for (uint64_t ts = 0; ts < 30; ts++) {
    auto w = t.Begin();
    w.U("ts_ns", ts);
    w.Word("op", ts % 2 ? "read" : "write");
    w.U("length", ts * 100);
    w.U("offset", ts);
    t.End(w);
  }
  EXPECT_EQ(t.rows(), 5u);  // 11, 13, 15, 17, 19
  EXPECT_TRUE(t.columns()[2].stored);
  EXPECT_FALSE(t.columns()[3].stored);  // not asked for
  EXPECT_EQ(At<uint64_t>(t.columns()[2], 0), 1100u);
}

// A row whose fields differ from the first row's is refused, not written past a column.
TEST(TableColumns, RowUnlikeTheFirstIsRefused) {
  ColumnQuery query;
  ColumnTable t("proc", &query);
  auto w = t.Begin();
  w.U("a", uint32_t{1});
  t.End(w);
  auto w2 = t.Begin();
  w2.U("a", uint64_t{2});  // wider than the column
  t.End(w2);
  EXPECT_TRUE(t.mismatched());
  auto w3 = t.Begin();
  w3.U("a", uint32_t{3});
  w3.U("b", uint32_t{4});  // one field more
  t.End(w3);
  EXPECT_EQ(t.rows(), 1u);
}

}  // namespace
}  // namespace iotwin::interop
