// Man pages and shell completion generated from the CLI definition (no BPF needed): every page
// renders without warnings and lists each option `iotwin SUB --help` shows; bash completes
// subcommands, options and files; `cmake --install` puts everything where distributions look.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "runtime_util.h"

namespace iotwin::test {
namespace {

namespace fs = std::filesystem;

// Where the build wrote the documents: next to the binary (src/cli/CMakeLists.txt).
fs::path DocsDir() { return fs::path(IotwinBin()).parent_path() / "docs"; }

// The build tree: the first directory above the binary holding CMakeCache.txt.
fs::path BuildRoot() {
  for (fs::path dir = fs::path(IotwinBin()).parent_path(); !dir.empty() && dir != dir.root_path();
       dir = dir.parent_path()) {
    if (fs::exists(dir / "CMakeCache.txt")) return dir;
  }
  return {};
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The first words of the lines of one section ("Options:", "Subcommands:") of CLI11's help.
std::vector<std::string> HelpSection(const std::string& help, const std::string& heading) {
  std::vector<std::string> words;
  std::istringstream in(help);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line == heading) {
      inside = true;
    } else if (inside && line.empty()) {
      break;
    } else if (inside && line.rfind("  ", 0) == 0) {
      std::istringstream fields(line);
      std::string first;
      fields >> first;
      words.push_back(first);
    }
  }
  return words;
}

// Subcommands as `iotwin --help` lists them (with a page each), not as the generator sees them.
std::vector<std::string> Subcommands() {
  RunResult help = test::Run({IotwinBin(), "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  std::vector<std::string> subs;
  for (const std::string& sub : HelpSection(help.out, "Subcommands:")) {
    if (sub != "help") subs.push_back(sub);
  }
  return subs;
}

// Option names ("-o", "--output") of `iotwin SUB --help`.
std::vector<std::string> HelpOptions(const std::string& sub) {
  RunResult help = sub.empty() ? test::Run({IotwinBin(), "--help"}) : test::Run({IotwinBin(), sub, "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  std::vector<std::string> names;
  for (const std::string& field : HelpSection(help.out, "Options:")) {
    std::istringstream parts(field);
    std::string name;
    // Only option lines: CLI11 wraps long help onto indented lines of their own.
    while (field.rfind('-', 0) == 0 && std::getline(parts, name, ',')) names.push_back(name);
  }
  return names;
}

// `text` names `option` as a whole word (not as the prefix of a longer option).
bool NamesOption(const std::string& text, const std::string& option) {
  std::regex word("(^|[^a-zA-Z0-9-])" + option + "($|[^a-zA-Z0-9-])");
  return std::regex_search(text, word);
}

std::vector<fs::path> ManPages() {
  std::vector<fs::path> pages;
  for (const auto& entry : fs::directory_iterator(DocsDir() / "man1")) pages.push_back(entry.path());
  std::sort(pages.begin(), pages.end());
  return pages;
}

TEST(ManCompletion, EveryPageRendersWithoutWarnings) {
  std::vector<fs::path> pages = ManPages();
  ASSERT_EQ(pages.size(), Subcommands().size() + 1) << "iotwin.1 and one page per subcommand";
  for (const fs::path& page : pages) {
    RunResult groff = test::Run({"/usr/bin/groff", "-ww", "-man", "-Tutf8", "-z", page});
    EXPECT_EQ(groff.exit_code, 0) << page << ": " << groff.err;
    EXPECT_EQ(groff.err, "") << page;
    RunResult man = test::Run({"/usr/bin/man", "--warnings", "-l", page}, 60, {"MANWIDTH=80"});
    EXPECT_EQ(man.exit_code, 0) << page << ": " << man.err;
    EXPECT_EQ(man.err, "") << page;
    for (const char* section : {"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS",
                                "OVERHEAD"}) {
      EXPECT_NE(man.out.find(std::string("\n") + section + "\n"), std::string::npos)
          << page << " has no " << section;
    }
  }
}

TEST(ManCompletion, EveryPageHoldsEveryOptionOfItsSubcommand) {
  std::vector<std::string> subs = Subcommands();
  subs.push_back("");  // iotwin(1) and the options of iotwin itself
  for (const std::string& sub : subs) {
    fs::path page = DocsDir() / "man1" / (sub.empty() ? "iotwin.1" : "iotwin-" + sub + ".1");
    RunResult man = test::Run({"/usr/bin/man", "-l", page}, 60, {"MANWIDTH=80"});
    ASSERT_EQ(man.exit_code, 0) << page << ": " << man.err;
    std::vector<std::string> options = HelpOptions(sub);
    EXPECT_FALSE(options.empty()) << sub;
    for (const std::string& option : options) {
      EXPECT_TRUE(NamesOption(man.out, option)) << page << " lacks " << option;
    }
  }
}

TEST(ManCompletion, RoffEscapesHyphensAndLeadingControlCharacters) {
  for (const fs::path& page : ManPages()) {
    std::istringstream roff(ReadFile(page));
    std::string line;
    while (std::getline(roff, line)) {
      // A line starting with ' or with . that is not a macro would be eaten by troff.
      EXPECT_NE(line.rfind('\'', 0), 0u) << page << ": " << line;
      if (line.rfind('.', 0) == 0) {
        EXPECT_TRUE(std::regex_search(line, std::regex("^\\.[A-Z]{1,2}( |$)"))) << page << ": " << line;
      }
      EXPECT_EQ(std::regex_search(line, std::regex("(^|[^\\\\])-")), false) << page << ": " << line;
    }
  }
}

// COMPREPLY of the bash completion function for the given words (the last one is completed).
std::vector<std::string> BashComplete(const std::vector<std::string>& words) {
  std::string array;
  for (const std::string& w : words) array += " '" + w + "'";
  std::string script = "source '" + (DocsDir() / "bash-completion" / "iotwin").string() +
                       "'; COMP_WORDS=(" + array + "); COMP_CWORD=" +
                       std::to_string(words.size() - 1) +
                       "; _iotwin; printf '%s\\n' \"${COMPREPLY[@]}\"";
  RunResult bash = test::Run({"/bin/bash", "--norc", "--noprofile", "-c", script});
  EXPECT_EQ(bash.exit_code, 0) << bash.err;
  EXPECT_EQ(bash.err, "");
  std::vector<std::string> replies;
  std::istringstream in(bash.out);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) replies.push_back(line);
  }
  return replies;
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(ManCompletion, BashCompletesSubcommandsOptionsAndFiles) {
  std::vector<std::string> rep = BashComplete({"iotwin", "rep"});
  EXPECT_TRUE(Contains(rep, "report")) << ::testing::PrintToString(rep);
  EXPECT_FALSE(Contains(rep, "record")) << ::testing::PrintToString(rep);
  EXPECT_EQ(BashComplete({"iotwin", "report", "--js"}), std::vector<std::string>{"--json"});
  EXPECT_TRUE(Contains(BashComplete({"iotwin", "help", "comp"}), "compare"));
  for (const std::string& sub : Subcommands()) {
    std::vector<std::string> options = BashComplete({"iotwin", sub, "-"});
    for (const std::string& option : HelpOptions(sub)) {
      EXPECT_TRUE(Contains(options, option)) << sub << " " << option;
    }
  }
  TempDir dir;
  std::ofstream(dir / "run.iotwin") << "x";
  EXPECT_EQ(BashComplete({"iotwin", "report", dir / "run."}),
            std::vector<std::string>{dir / "run.iotwin"});
}

// After an option with a fixed set of words, those words; after one that takes a number, nothing
// (not the files of the current directory).
TEST(ManCompletion, BashCompletesTheValuesOfAnOption) {
  EXPECT_EQ(BashComplete({"iotwin", "record", "--on-failure", ""}),
            (std::vector<std::string>{"terminate", "kill", "leave"}));
  EXPECT_EQ(BashComplete({"iotwin", "replay", "run.iotwin", "--pace", "g"}),
            std::vector<std::string>{"gaps"});
  EXPECT_EQ(BashComplete({"iotwin", "import", "--format", "str"}), std::vector<std::string>{"strace"});
  EXPECT_EQ(BashComplete({"iotwin", "report", "x", "--scope", ""}),
            (std::vector<std::string>{"data", "all"}));
  TempDir dir;
  std::ofstream(dir / "5file") << "x";
  EXPECT_EQ(BashComplete({"iotwin", "record", "--duration", dir / "5"}), std::vector<std::string>{});
  EXPECT_EQ(BashComplete({"iotwin", "record", "-o", dir / "5"}),
            std::vector<std::string>{dir / "5file"});
}

// iotwin(1) holds the conventions every subcommand shares; each page its own exit statuses.
TEST(ManCompletion, PagesSayTheConventionsAndEachSubcommandsExitStatuses) {
  auto page = [](const std::string& name) {
    RunResult man = test::Run({"/usr/bin/man", "-l", DocsDir() / "man1" / (name + ".1")}, 60,
                              {"MANWIDTH=200"});
    EXPECT_EQ(man.exit_code, 0) << name << ": " << man.err;
    return man.out;
  };
  std::string main_page = page("iotwin");
  for (const char* text : {"\nCONVENTIONS\n", "4k", "500ms", "standard input", "--json",
                           "iotwin SUBCOMMAND:"}) {
    EXPECT_NE(main_page.find(text), std::string::npos) << "iotwin(1) lacks " << text;
  }
  std::map<std::string, std::string> sections;  // each page rendered once (man takes ~0.5 s)
  auto exit_status = [&](const std::string& name) {
    if (!sections.count(name)) {
      std::string text = page(name);
      size_t start = text.find("\nEXIT STATUS\n"), end = text.find("\nOVERHEAD\n");
      EXPECT_LT(start, end) << name;
      sections[name] = start < end ? text.substr(start, end - start) : "";
    }
    return sections[name];
  };
  EXPECT_NE(exit_status("iotwin-record").find("traced command's exit status"), std::string::npos)
      << exit_status("iotwin-record");
  EXPECT_NE(exit_status("iotwin-record").find("--fail-on-loss"), std::string::npos);
  EXPECT_NE(exit_status("iotwin-replay").find("--strict"), std::string::npos);
  EXPECT_NE(exit_status("iotwin-demo").find("\n       1 "), std::string::npos) << exit_status("iotwin-demo");
  EXPECT_NE(exit_status("iotwin-dump").find("--salvage"), std::string::npos);
  EXPECT_NE(exit_status("iotwin-import").find("no record"), std::string::npos);
  EXPECT_EQ(exit_status("iotwin-report").find("\n       1 "), std::string::npos);
}

std::string ZshPath() {
  for (const char* path : {"/usr/bin/zsh", "/bin/zsh"}) {
    if (fs::exists(path)) return path;
  }
  return "";
}

TEST(ManCompletion, ZshCompletionParsesAndListsEveryOption) {
  std::string zsh = ZshPath();
  if (zsh.empty()) GTEST_SKIP() << "zsh is not installed (/usr/bin/zsh): the zsh script is not checked";
  fs::path script = DocsDir() / "zsh" / "_iotwin";
  RunResult parse = test::Run({zsh, "-f", "-n", script});
  EXPECT_EQ(parse.exit_code, 0) << parse.err;
  std::string text = ReadFile(script);
  for (const std::string& sub : Subcommands()) {
    EXPECT_NE(text.find("'" + sub + ":"), std::string::npos) << sub;
    for (const std::string& option : HelpOptions(sub)) {
      EXPECT_TRUE(NamesOption(text, option)) << sub << " " << option;
    }
  }
}

TEST(ManCompletion, CmakeInstallPutsThemWhereDistributionsLook) {
  fs::path build = BuildRoot();
  ASSERT_FALSE(build.empty()) << "no CMakeCache.txt above " << IotwinBin();
  std::smatch cmake;
  std::string cache = ReadFile(build / "CMakeCache.txt");
  ASSERT_TRUE(std::regex_search(cache, cmake, std::regex("CMAKE_COMMAND:INTERNAL=(.*)")));
  TempDir prefix;
  RunResult install = test::Run({cmake[1].str(), "--install", build, "--prefix", prefix.path(),
                           "--component", "man_completion"});
  ASSERT_EQ(install.exit_code, 0) << install.out << install.err;
  fs::path root = prefix.path();
  EXPECT_TRUE(fs::is_regular_file(root / "share/man/man1/iotwin.1"));
  for (const std::string& sub : Subcommands()) {
    fs::path page = root / "share/man/man1" / ("iotwin-" + sub + ".1");
    EXPECT_TRUE(fs::is_regular_file(page)) << page;
  }
  size_t installed_pages = std::distance(fs::directory_iterator(root / "share/man/man1"),
                                         fs::directory_iterator());
  EXPECT_EQ(installed_pages, Subcommands().size() + 1);
  EXPECT_EQ(ReadFile(root / "share/bash-completion/completions/iotwin"),
            ReadFile(DocsDir() / "bash-completion" / "iotwin"));
  EXPECT_EQ(ReadFile(root / "share/zsh/vendor-completions/_iotwin"),
            ReadFile(DocsDir() / "zsh" / "_iotwin"));
}

}  // namespace
}  // namespace iotwin::test
