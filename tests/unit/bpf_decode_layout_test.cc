// The capture's decoder (iot_sc_decode in bpf/syscall.bpf.c) is a second op table written as
// code: one case per IOT_OP_*, each filling the record's fields from the call's arguments. This
// test reads that function's source and requires, for every op, that the fields it fills are
// the ones the op table (format/op_info.h) gives a role: a descriptor in `fd`/`fd2`, a value in
// `offset`/`length`/`aux`, a path in path1/path2, an iovec layout. A field the decoder fills and
// the table leaves unused (or the reverse) is a disagreement every consumer of the table would
// misread; it fails here, in CI, without a kernel.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "format/op_info.h"
#include "format/records.h"

namespace iotwin::bpf_decode_layout_test {
namespace {

// What one case group of iot_sc_decode writes.
struct Decoded {
  std::set<std::string> ops;                      // IOT_OP_* labels of the group
  std::map<std::string, std::string> sc_fields;   // sc->FIELD = value (the last written)
  std::set<std::string> d_fields;                 // d->FIELD written (path1, path2, ...)
  bool pos_offset = false;                        // d->pos_offset = true
  bool vectored = false;                          // d->vectored = true
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string StripComments(const std::string& s) {
  return std::regex_replace(s, std::regex(R"(/\*[\s\S]*?\*/)"), "");
}

// The body of the function `name` (from its opening brace to the closing one at column 0).
std::string FunctionBody(const std::string& src, const std::string& name) {
  const size_t at = src.find(name + "(");
  if (at == std::string::npos) return "";
  const size_t open = src.find("\n{\n", at);
  const size_t close = src.find("\n}\n", open);
  if (open == std::string::npos || close == std::string::npos) return "";
  return src.substr(open, close - open);
}

// The case groups of the decoder's switch, from its source text.
std::vector<Decoded> ParseDecoder(const std::string& body) {
  std::vector<Decoded> groups;
  const std::regex case_re(R"(^\s*case\s+(IOT_OP_[A-Z0-9_]+)\s*:)");
  const std::regex sc_re(R"(sc->(fd2|fd|offset|length|aux)\s*=\s*([^;]+);)");
  const std::regex sc_read_re(R"(&sc->(fd2|fd|offset|length|aux)\b)");  // read into by a helper
  const std::regex d_re(R"(d->(path1|path2|pos_offset|vectored)\s*=\s*([^;]+);)");
  std::istringstream lines(body);
  std::string line;
  bool in_body = false;  // the current group has statements: a case label starts a new one
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_search(line, m, case_re)) {
      if (groups.empty() || in_body) groups.emplace_back();
      groups.back().ops.insert(m[1]);
      in_body = false;
      continue;
    }
    if (groups.empty()) continue;
    Decoded& g = groups.back();
    for (auto it = std::sregex_iterator(line.begin(), line.end(), sc_re);
         it != std::sregex_iterator(); ++it) {
      g.sc_fields[(*it)[1]] = (*it)[2];
      in_body = true;
    }
    for (auto it = std::sregex_iterator(line.begin(), line.end(), sc_read_re);
         it != std::sregex_iterator(); ++it) {
      g.sc_fields[(*it)[1]] = "*";
      in_body = true;
    }
    for (auto it = std::sregex_iterator(line.begin(), line.end(), d_re);
         it != std::sregex_iterator(); ++it) {
      const std::string field = (*it)[1], value = (*it)[2];
      if (field == "pos_offset") g.pos_offset = value == "true";
      else if (field == "vectored") g.vectored = value == "true";
      else g.d_fields.insert(field);
      in_body = true;
    }
    if (line.find("break;") != std::string::npos || line.find('=') != std::string::npos) {
      in_body = true;
    }
  }
  return groups;
}

uint16_t OpCode(const std::string& label) {
  const std::string name = label.substr(std::string("IOT_OP_").size());
  for (uint16_t op = 1; op <= IOT_OP_MAX; op++) {
    std::string upper(GetOpInfo(op).name);
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (upper == name) return op;
  }
  return IOT_OP_UNKNOWN;
}

// The disagreements between one decoded op and its table row, one line each.
std::vector<std::string> Disagreements(const std::string& label, const Decoded& g) {
  std::vector<std::string> out;
  const uint16_t op = OpCode(label);
  if (op == IOT_OP_UNKNOWN) return {label + ": no row of the op table has this name"};
  const OpInfo& i = GetOpInfo(op);
  auto expect = [&](bool decoder, bool table, const std::string& what) {
    if (decoder != table) {
      out.push_back(label + ": " + what + (decoder ? " filled by the decoder, not in the table"
                                                   : " in the table, not filled by the decoder"));
    }
  };
  // A descriptor field holds an argument (a descriptor); -100 is AT_FDCWD written for a path
  // resolved against the cwd, which the table says by the path's base.
  auto fd_arg = [&](const char* field) {
    auto it = g.sc_fields.find(field);
    return it != g.sc_fields.end() && it->second != "-100";
  };
  expect(fd_arg("fd"), i.fd != FdRole::kNone, "a descriptor in fd");
  expect(fd_arg("fd2"), i.fd2 != FdRole::kNone, "a descriptor in fd2");
  expect(g.sc_fields.count("offset") || g.pos_offset, i.offset != FieldUse::kUnused, "offset");
  expect(g.pos_offset, i.offset == FieldUse::kPositionBefore, "offset as the position used");
  // A vectored call's length is the sum of its iovecs, which the record's tail fills.
  const bool iovec_total = g.vectored && i.length == FieldUse::kIovecTotal;
  expect(g.sc_fields.count("length") > 0 || iovec_total, i.length != FieldUse::kUnused, "length");
  expect(g.sc_fields.count("aux") > 0, i.aux != FieldUse::kUnused, "aux");
  expect(g.d_fields.count("path1") > 0, i.path != PathRole::kNone, "path");
  expect(g.d_fields.count("path2") > 0, i.path2 != PathRole::kNone, "path2");
  expect(g.vectored, i.vectored, "an iovec layout");
  return out;
}

std::string DecoderSource() {
  return StripComments(ReadFile(std::string(IOTWIN_TEST_DATA_DIR) + "/../../bpf/syscall.bpf.c"));
}

TEST(BpfDecodeLayout, TheDecoderFillsTheFieldsTheOpTableGivesARole) {
  const std::string body = FunctionBody(DecoderSource(), "iot_sc_decode");
  ASSERT_FALSE(body.empty()) << "iot_sc_decode not found in bpf/syscall.bpf.c";
  const std::vector<Decoded> groups = ParseDecoder(body);
  ASSERT_GT(groups.size(), 30u);
  std::set<std::string> decoded;
  std::vector<std::string> problems;
  for (const Decoded& g : groups) {
    for (const std::string& label : g.ops) {
      decoded.insert(label);
      for (std::string& p : Disagreements(label, g)) problems.push_back(std::move(p));
    }
  }
  // Every op of the table has its case (a missing one records nothing but the op code).
  for (uint16_t op = 1; op <= IOT_OP_MAX; op++) {
    std::string upper(GetOpInfo(op).name);
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (!decoded.count("IOT_OP_" + upper)) problems.push_back("IOT_OP_" + upper + ": no case");
  }
  std::string all;
  for (const std::string& p : problems) all += p + "\n";
  EXPECT_TRUE(problems.empty()) << all;
}

// The parser itself: a decoder that fills a field the table leaves unused is caught.
TEST(BpfDecodeLayout, AFieldTheTableDoesNotNameIsADisagreement) {
  const std::string fake =
      "\n{\n\tswitch (op) {\n\tcase IOT_OP_FSYNC:\n\t\tsc->fd = a0;\n\t\tsc->length = a1;\n"
      "\t\tbreak;\n\tcase IOT_OP_READ:\n\tcase IOT_OP_WRITE:\n\t\tsc->fd = a0;\n"
      "\t\tsc->length = a2;\n\t\td->pos_offset = true;\n\t\tbreak;\n\t}\n";
  const std::vector<Decoded> groups = ParseDecoder(fake);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(Disagreements("IOT_OP_FSYNC", groups[0]).size(), 1u);  // fsync has no length
  EXPECT_TRUE(Disagreements("IOT_OP_READ", groups[1]).empty());
  EXPECT_TRUE(Disagreements("IOT_OP_WRITE", groups[1]).empty());
}

}  // namespace
}  // namespace iotwin::bpf_decode_layout_test
