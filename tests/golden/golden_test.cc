// Golden tests: every folder tests/golden/<case>/ holds input files, a `cmd` file (iotwin
// command lines) and `expected` (what those commands print and write). The runner executes the
// built iotwin binary for each case and compares. IOTWIN_GOLDEN_UPDATE=1 rewrites `expected`
// instead. Rules for cmd, placeholders and normalisation: tests/golden/README.md.

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;

constexpr int kCommandTimeoutS = 120;

struct GoldenCase {
  std::string name;
  fs::path dir;
};

// Test output names the case, not the bytes of the struct.
void PrintTo(const GoldenCase& gc, std::ostream* os) { *os << gc.name; }

std::vector<GoldenCase> ListCases() {
  std::vector<GoldenCase> cases;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(IOTWIN_GOLDEN_DIR, ec)) {
    if (entry.is_directory() && fs::exists(entry.path() / "cmd")) {
      cases.push_back({entry.path().filename().string(), entry.path()});
    }
  }
  std::sort(cases.begin(), cases.end(),
            [](const GoldenCase& a, const GoldenCase& b) { return a.name < b.name; });
  return cases;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

void ReplaceAll(std::string* text, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t at = text->find(from); at != std::string::npos; at = text->find(from, at + to.size())) {
    text->replace(at, from.size(), to);
  }
}

// Where a case runs: its source folder, a fresh scratch folder and the folder collected as output.
struct CaseContext {
  fs::path dir;
  fs::path tmp;
  fs::path out;
  std::string input;  // the case's file named input or input.*, empty when not exactly one
};

// The absolute folders become their placeholders again, so `expected` is the same on every
// machine. The scratch folder first: it is never inside the case folder, but may share a prefix.
std::string Normalise(std::string text, const CaseContext& ctx) {
  ReplaceAll(&text, ctx.tmp.string(), "{tmp}");
  ReplaceAll(&text, ctx.dir.string(), "{dir}");
  return text;
}

// One line of `cmd` split into words at blanks; '...' quotes a word holding blanks.
std::vector<std::string> SplitWords(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false, quoted = false;
  for (char c : line) {
    if (quoted) {
      if (c == '\'') quoted = false; else word += c;
    } else if (c == '\'') {
      quoted = in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

std::string Expand(std::string word, const CaseContext& ctx) {
  ReplaceAll(&word, "{in}", ctx.input);
  ReplaceAll(&word, "{out}", ctx.out.string());
  ReplaceAll(&word, "{tmp}", ctx.tmp.string());
  ReplaceAll(&word, "{dir}", ctx.dir.string());
  return word;
}

struct CommandResult {
  std::string out;
  std::string err;
  int status = 0;  // as waitpid gives it
};

// Runs iotwin in the scratch folder, stdin from /dev/null, TZ=UTC and LC_ALL=C, killed after
// kCommandTimeoutS seconds (the alarm survives exec).
CommandResult RunIotwin(const std::vector<std::string>& args, const CaseContext& ctx) {
  const fs::path out_path = ctx.tmp / ".golden-stdout", err_path = ctx.tmp / ".golden-stderr";
  std::vector<std::string> argv = {IOTWIN_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  CommandResult r;
  pid_t pid = fork();
  if (pid == 0) {
    int in = open("/dev/null", O_RDONLY);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0 || chdir(ctx.tmp.c_str()) != 0) _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    setenv("TZ", "UTC", 1);
    setenv("LC_ALL", "C", 1);
    alarm(kCommandTimeoutS);
    execv(cargv[0], cargv.data());
    dprintf(2, "exec %s: %s\n", cargv[0], strerror(errno));
    _exit(127);
  }
  if (pid < 0 || waitpid(pid, &r.status, 0) != pid) {
    r.status = -1;
    return r;
  }
  r.out = ReadFile(out_path);
  r.err = ReadFile(err_path);
  fs::remove(out_path);
  fs::remove(err_path);
  return r;
}

// A text block that always ends its last line; a missing final newline is said, not hidden.
void AppendBlock(std::string* to, const std::string& text) {
  *to += text;
  if (!text.empty() && text.back() != '\n') *to += "\n== NO NEWLINE AT END ==\n";
}

// Every file under {out}, in path order, each after a `== FILE relative/path ==` header.
// Binary files (holding a NUL byte) are named with their size only.
void AppendOutputFiles(std::string* to, const CaseContext& ctx) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(ctx.out)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    std::string name = fs::relative(file, ctx.out).string();
    std::string content = ReadFile(file);
    if (content.find('\0') != std::string::npos) {
      *to += "== FILE " + name + " (binary, " + std::to_string(content.size()) + " bytes) ==\n";
      continue;
    }
    *to += "== FILE " + name + " ==\n";
    AppendBlock(to, Normalise(content, ctx));
  }
}

std::string FindInput(const fs::path& dir) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name == "input" || name.rfind("input.", 0) == 0) found.push_back(entry.path().string());
  }
  return found.size() == 1 ? found[0] : std::string();
}

class Golden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(Golden, Case) {
  const GoldenCase& gc = GetParam();
  ASSERT_TRUE(fs::exists(IOTWIN_BIN)) << "iotwin binary missing: " << IOTWIN_BIN;
  const char* base = getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/iotwin-golden-XXXXXX";
  ASSERT_NE(mkdtemp(pattern.data()), nullptr) << pattern << ": " << strerror(errno);
  CaseContext ctx{fs::canonical(gc.dir), fs::canonical(pattern), {}, {}};
  ctx.out = ctx.tmp / "out";
  fs::create_directory(ctx.out);
  ctx.input = FindInput(ctx.dir);
  if (!ctx.input.empty()) {
    // {in} is the input's bare name, copied into the scratch folder where commands run: a
    // trace records its source as given, and a path of the case folder would make the trace's
    // size (which report prints) differ between checkouts.
    fs::path name = fs::path(ctx.input).filename();
    fs::copy_file(ctx.input, ctx.tmp / name);
    ctx.input = name.string();
  }

  std::string actual;
  bool crashed = false;
  std::istringstream lines(ReadFile(ctx.dir / "cmd"));
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> words = SplitWords(line);
    if (words.empty() || words[0][0] == '#') continue;
    if (line.find("{in}") != std::string::npos) {
      ASSERT_FALSE(ctx.input.empty()) << gc.name << ": {in} needs exactly one file input[.*]";
    }
    for (auto& w : words) w = Expand(w, ctx);
    CommandResult r = RunIotwin(words, ctx);
    actual += "$ iotwin " + line + "\n";
    AppendBlock(&actual, Normalise(r.out, ctx));
    if (!r.err.empty()) {
      actual += "== STDERR ==\n";
      AppendBlock(&actual, Normalise(r.err, ctx));
    }
    if (WIFSIGNALED(r.status)) {
      crashed = true;
      actual += "== KILLED BY SIGNAL " + std::to_string(WTERMSIG(r.status)) + " ==\n";
    } else if (r.status != 0) {
      actual += "== EXIT " + std::to_string(WIFEXITED(r.status) ? WEXITSTATUS(r.status) : -1) +
                " ==\n";
    }
  }
  AppendOutputFiles(&actual, ctx);
  std::error_code ec;
  fs::remove_all(ctx.tmp, ec);

  // A crash is never an expected output: it fails even while updating.
  EXPECT_FALSE(crashed) << gc.name << ": iotwin was killed by a signal\n" << actual;
  const fs::path expected_path = ctx.dir / "expected";
  const char* update = getenv("IOTWIN_GOLDEN_UPDATE");
  if (update && std::string(update) == "1" && !crashed) {
    ASSERT_TRUE(WriteFile(expected_path, actual)) << "cannot write " << expected_path;
    return;
  }
  ASSERT_TRUE(fs::exists(expected_path))
      << gc.name << ": no expected file; write it with IOTWIN_GOLDEN_UPDATE=1 ctest -L golden";
  const fs::path actual_dir = fs::path(IOTWIN_GOLDEN_ACTUAL_DIR) / gc.name;
  fs::create_directories(actual_dir, ec);
  WriteFile(actual_dir / "actual", actual);
  EXPECT_EQ(ReadFile(expected_path), actual)
      << gc.name << ": output differs from " << expected_path.string() << " (actual output in "
      << (actual_dir / "actual").string()
      << "); if the change is intended, bless it with IOTWIN_GOLDEN_UPDATE=1 ctest -L golden";
}

// Case names become test names: gtest allows letters, digits and underscores only.
std::string CaseName(const ::testing::TestParamInfo<GoldenCase>& info) {
  std::string name = info.param.name;
  for (char& c : name) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Golden, Golden, ::testing::ValuesIn(ListCases()), CaseName);

// An empty or misplaced golden folder must not pass as "nothing to compare".
TEST(GoldenCases, AreFound) {
  EXPECT_FALSE(ListCases().empty()) << "no case folders with a cmd file in " << IOTWIN_GOLDEN_DIR;
}

}  // namespace
