// core/knobs.h: the typed reads of the LOUPE_* environment variables refuse bad values, and the
// table, docs/cli.md's table and the variables the tree reads cannot drift apart (docs/design.md,
// "Knobs and paths").
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "core/error.h"
#include "core/knobs.h"
#include "test_util.h"

namespace fs = std::filesystem;
namespace knobs = loupe::knobs;
using loupe::test::EnvVar;

namespace {

// The Error `f` throws; fails the test when it throws none.
template <class F>
std::string refusal(F f) {
  try {
    f();
  } catch (const loupe::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no loupe::Error";
  return "";
}

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

using Unset = loupe::test::UnsetEnv;

TEST(Knobs, FlagsTakeZeroOrOne) {
  {
    Unset u("LOUPE_FUSE");
    EXPECT_TRUE(knobs::flag("LOUPE_FUSE"));  // the table's default
  }
  {
    Unset u("LOUPE_DDP_CHECK");
    EXPECT_FALSE(knobs::flag("LOUPE_DDP_CHECK"));
  }
  {
    EnvVar e("LOUPE_FUSE", "0");
    EXPECT_FALSE(knobs::flag("LOUPE_FUSE"));
  }
  {
    EnvVar e("LOUPE_DDP_CHECK", "1");
    EXPECT_TRUE(knobs::flag("LOUPE_DDP_CHECK"));
  }
  {
    EnvVar e("LOUPE_DDP_CHECK", "0");  // a value, not the variable's presence, decides
    EXPECT_FALSE(knobs::flag("LOUPE_DDP_CHECK"));
  }
  {
    EnvVar e("LOUPE_FUSE", "");  // empty counts as unset
    EXPECT_TRUE(knobs::flag("LOUPE_FUSE"));
  }
  for (const char* bad : {"yes", "2", "true", " 1", "1 ", "01", "off"}) {
    EnvVar e("LOUPE_COMPUTE_COPY", bad);
    const std::string why = refusal([] { knobs::flag("LOUPE_COMPUTE_COPY"); });
    EXPECT_HAS(why, std::string("LOUPE_COMPUTE_COPY='") + bad + "' is not allowed");
    EXPECT_HAS(why, "takes 0 or 1");
    EXPECT_HAS(why, "Unset it for the default (1)");
  }
}

TEST(Knobs, VerboseNamesWhatItPrints) {
  {
    Unset u("LOUPE_VERBOSE");
    EXPECT_FALSE(knobs::verbose("conv"));
  }
  {
    EnvVar e("LOUPE_VERBOSE", "conv");
    EXPECT_TRUE(knobs::verbose("conv"));
    EXPECT_FALSE(knobs::verbose("lstm"));
  }
  {
    EnvVar e("LOUPE_VERBOSE", "all");
    EXPECT_TRUE(knobs::verbose("conv"));
    EXPECT_TRUE(knobs::verbose("lstm"));
  }
  {
    EnvVar e("LOUPE_VERBOSE", "1");
    EXPECT_HAS(refusal([] { knobs::verbose("conv"); }), "LOUPE_VERBOSE='1' is not allowed");
  }
}

TEST(Knobs, IntegersTakeTheirRange) {
  {
    EnvVar e("LOUPE_NUM_THREADS", "8");
    EXPECT_EQ(knobs::integer("LOUPE_NUM_THREADS"), 8);
  }
  {
    EnvVar e("LOUPE_NUM_THREADS", "4096");
    EXPECT_EQ(knobs::integer("LOUPE_NUM_THREADS"), 4096);
  }
  {
    Unset u("LOUPE_NUM_THREADS");
    EXPECT_EQ(knobs::integer("LOUPE_NUM_THREADS"), std::nullopt);
  }
  for (const char* bad : {"0", "-1", "4097", "8x", "x8", "1.5", "99999999999999999999999", "0x10"}) {
    EnvVar e("LOUPE_NUM_THREADS", bad);
    const std::string why = refusal([] { knobs::integer("LOUPE_NUM_THREADS"); });
    EXPECT_HAS(why, std::string("LOUPE_NUM_THREADS='") + bad + "' is not allowed");
    EXPECT_HAS(why, "a whole number from 1 to 4096");
    EXPECT_HAS(why, "the cores this process may use");
  }
}

TEST(Knobs, ChoicesTakeTheirValues) {
  {
    EnvVar e("LOUPE_LSTM_ALGO", "loupe8");
    EXPECT_EQ(knobs::choice("LOUPE_LSTM_ALGO"), "loupe8");
  }
  {
    EnvVar e("LOUPE_LSTM_LAYOUT", "seq");
    EXPECT_EQ(knobs::choice("LOUPE_LSTM_LAYOUT"), "seq");
  }
  {
    EnvVar e("LOUPE_LSTM_ALGO", "cudnn");
    const std::string why = refusal([] { knobs::choice("LOUPE_LSTM_ALGO"); });
    EXPECT_HAS(why, "LOUPE_LSTM_ALGO='cudnn' is not allowed");
    EXPECT_HAS(why, "loupe, loupe16, loupe8, step, standard, static, small_h or dynamic");
  }
  {
    EnvVar e("LOUPE_LSTM_LAYOUT", "Batch");  // case matters
    EXPECT_HAS(refusal([] { knobs::choice("LOUPE_LSTM_LAYOUT"); }), "takes batch or seq");
  }
}

TEST(Knobs, TextIsTakenAsIs) {
  EnvVar e("LOUPE_TOOLS_DIR", "/some where/tools");
  EXPECT_EQ(knobs::text("LOUPE_TOOLS_DIR"), "/some where/tools");
  Unset u("LOUPE_DATA");
  EXPECT_EQ(knobs::text("LOUPE_DATA"), std::nullopt);
}

TEST(Knobs, ReadOnceUntilReload) {
  EnvVar e("LOUPE_NUM_THREADS", "3");
  EXPECT_EQ(knobs::integer("LOUPE_NUM_THREADS"), 3);
  setenv("LOUPE_NUM_THREADS", "5", 1);  // no reload: the first reading stands
  EXPECT_EQ(knobs::integer("LOUPE_NUM_THREADS"), 3);
  knobs::reload();
  EXPECT_EQ(knobs::integer("LOUPE_NUM_THREADS"), 5);
  setenv("LOUPE_NUM_THREADS", "many", 1);
  knobs::reload();
  EXPECT_HAS(refusal([] { knobs::integer("LOUPE_NUM_THREADS"); }), "'many' is not allowed");
  setenv("LOUPE_NUM_THREADS", "2", 1);  // the refusal is kept too
  EXPECT_HAS(refusal([] { knobs::integer("LOUPE_NUM_THREADS"); }), "'many' is not allowed");
}

TEST(Knobs, UnknownNamesAndWrongKindsAreProgrammingErrors) {
  EXPECT_HAS(refusal([] { knobs::flag("LOUPE_NO_SUCH_KNOB"); }), "LOUPE_NO_SUCH_KNOB is not a loupe environment variable");
  EXPECT_HAS(refusal([] { knobs::flag("LOUPE_NUM_THREADS"); }), "LOUPE_NUM_THREADS is an integer knob, read as a flag");
  EXPECT_HAS(refusal([] { knobs::text("LOUPE_FUSE"); }), "LOUPE_FUSE is a flag knob");
}

TEST(Knobs, TheTableIsWellFormed) {
  std::set<std::string> names;
  for (const knobs::Knob& k : knobs::table()) {
    EXPECT_TRUE(std::regex_match(k.name, std::regex("LOUPE_[A-Z0-9_]+"))) << k.name;
    EXPECT_TRUE(names.insert(k.name).second) << k.name << " twice";
    EXPECT_NE(std::string(k.read_by), "") << k.name;
    EXPECT_NE(std::string(k.meaning), "") << k.name;
    EXPECT_NE(std::string(k.fallback), "") << k.name;
    EXPECT_NE(knobs::allowed(k), "") << k.name;
    for (const char* field : {k.read_by, k.meaning, k.fallback})  // a '|' would break docs/cli.md's table
      EXPECT_EQ(std::string(field).find('|'), std::string::npos) << k.name;
    if (k.kind == knobs::Kind::Choice) EXPECT_GE(k.choices.size(), 2u) << k.name;
    if (k.kind == knobs::Kind::Integer) EXPECT_LE(k.min, k.max) << k.name;
    if (k.kind == knobs::Kind::Flag) EXPECT_EQ(k.fallback, std::string(k.on ? "1" : "0")) << k.name;
  }
}

// ---- The table against the tree and docs/cli.md ------------------------------------------------

const fs::path kRoot = LOUPE_SOURCE_DIR;

using loupe::test::slurp;

// .git, and what .gitignore keeps out of the tree: build*/, .data/ (a device run's carried files), out/;
// a developer's git-ignored device folder and A/B worktree (.devdata/, .base/: dev/gpu_configure.sh);
// and the lab notebook, whose records name variables since deleted (docs/design.md, "The complexity
// budget").
bool skipped_dir(const fs::path& rel) {
  const std::string r = rel.generic_string();
  const std::string top = rel.begin()->string();
  return top == ".git" || top == ".data" || top == "out" || top.rfind("build", 0) == 0 || top == "third_party" ||
         r == "tests/fuzz/corpus" || top == ".devdata" || top == ".base" || top == "lab";
}

// The files that are the table itself, or its copy, or test it.
bool is_table(const std::string& rel) {
  return rel == "framework/core/knobs.cpp" || rel == "framework/core/knobs.h" || rel == "docs/cli.md" ||
         rel == "tests/test_knobs.cpp";
}

// CMake's own variables (option(), set(... CACHE ...)): LOUPE_CUDA=OFF is one of them, not the
// environment.
std::set<std::string> cmake_options() {
  std::set<std::string> names;
  const std::string cm = slurp(kRoot / "CMakeLists.txt");
  const std::regex opt(R"((?:option|set)\((LOUPE_[A-Z0-9_]+)[^\n]*(?:CACHE|"))");
  for (auto it = std::sregex_iterator(cm.begin(), cm.end(), opt); it != std::sregex_iterator(); ++it)
    names.insert((*it)[1]);
  return names;
}

// Every LOUPE_* variable of the environment that the tree reads, sets or names as one, with the
// first place it does: in C and C++ a string literal that is the whole name ("LOUPE_FUSE", as
// knobs and getenv take it) or NAME= (a command line built in a string, a comment giving a value);
// in CMake $ENV{NAME} or NAME= on an ENVIRONMENT line; elsewhere (shell, Python, Markdown) $NAME,
// ${NAME...} or NAME= not after -D.
std::map<std::string, std::string> variables_in_tree() {
  const std::regex c_like(R"re("(LOUPE_[A-Z0-9_]+)"|(?:^|[^A-Za-z0-9_-])(LOUPE_[A-Z0-9_]+)=|\$\{?(LOUPE_[A-Z0-9_]+))re");
  const std::regex cmake_env(R"(\$ENV\{(LOUPE_[A-Z0-9_]+)\})"), cmake_assign(R"((?:^|[^A-Za-z0-9_-])(LOUPE_[A-Z0-9_]+)=)");
  const std::regex other(R"re(\$\{?(LOUPE_[A-Z0-9_]+)|(?:^|[^A-Za-z0-9_-])(LOUPE_[A-Z0-9_]+)=|["'](LOUPE_[A-Z0-9_]+)["'])re");
  const std::set<std::string> text_ext = {".cpp", ".h", ".hpp", ".cu", ".cuh", ".c", ".sh", ".py", ".md", ".txt",
                                          ".cmake", ".in"};
  const std::set<std::string> options = cmake_options();
  std::map<std::string, std::string> found;
  for (auto it = fs::recursive_directory_iterator(kRoot); it != fs::recursive_directory_iterator(); ++it) {
    const fs::path rel = fs::relative(it->path(), kRoot);
    if (it->is_directory()) {
      if (skipped_dir(rel)) it.disable_recursion_pending();
      continue;
    }
    const std::string ext = rel.extension().string(), name = rel.filename().string();
    if (!it->is_regular_file() || is_table(rel.generic_string()) || (!text_ext.count(ext) && name != "run")) continue;
    const bool is_c = ext == ".cpp" || ext == ".h" || ext == ".hpp" || ext == ".cu" || ext == ".cuh" || ext == ".c";
    const bool is_cmake = name == "CMakeLists.txt" || ext == ".cmake" || ext == ".in";
    std::istringstream in(slurp(it->path()));
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      auto add = [&](const std::regex& re) {
        for (auto m = std::sregex_iterator(line.begin(), line.end(), re); m != std::sregex_iterator(); ++m)
          for (size_t g = 1; g < m->size(); ++g)
            if ((*m)[g].matched && !options.count((*m)[g]))
              found.emplace((*m)[g], rel.generic_string() + ":" + std::to_string(n));
      };
      if (is_c) add(c_like);
      else if (is_cmake) {
        add(cmake_env);
        if (line.find("ENVIRONMENT") != std::string::npos) add(cmake_assign);
      } else add(other);
    }
  }
  return found;
}

// The complexity budget's limit (docs/design.md, "The complexity budget").
TEST(Knobs, AtMostTwentyVariables) { EXPECT_LE(knobs::table().size(), 20u); }

TEST(KnobsTree, EveryVariableReadIsInTheTableAndEveryKnobIsRead) {
  const std::map<std::string, std::string> found = variables_in_tree();
  std::set<std::string> table;
  for (const knobs::Knob& k : knobs::table()) table.insert(k.name);
  for (const auto& [name, where] : found)
    EXPECT_TRUE(table.count(name)) << name << " (" << where << ") is read but is not in the table of "
                                   << "framework/core/knobs.cpp; add it there and to docs/cli.md";
  for (const std::string& name : table)
    EXPECT_TRUE(found.count(name)) << name << " is in the table of framework/core/knobs.cpp but nothing in the "
                                   << "tree reads it; remove it (and its row in docs/cli.md)";
  EXPECT_GE(found.size(), 10u);  // the scan itself works
}

TEST(KnobsTree, OnlyTheKnobsModuleCallsGetenvOnALoupeVariable) {
  const std::regex direct(R"(getenv\s*\(\s*"LOUPE_)");
  for (auto it = fs::recursive_directory_iterator(kRoot); it != fs::recursive_directory_iterator(); ++it) {
    const fs::path rel = fs::relative(it->path(), kRoot);
    if (it->is_directory()) {
      if (skipped_dir(rel)) it.disable_recursion_pending();
      continue;
    }
    const std::string ext = rel.extension().string();
    if (!it->is_regular_file() || rel.generic_string() == "tests/test_knobs.cpp" ||
        !(ext == ".cpp" || ext == ".h" || ext == ".cu" || ext == ".cuh" || ext == ".hpp" || ext == ".c"))
      continue;
    const std::string s = slurp(it->path());
    EXPECT_FALSE(std::regex_search(s, direct)) << rel << " reads a LOUPE_* variable with getenv; use "
                                               << "core/knobs.h (knobs::flag, integer, choice or text)";
  }
}

TEST(KnobsTree, TheDocsTableIsTheKnobsTable) {
  const std::string doc = slurp(kRoot / "docs" / "cli.md");
  const size_t section = doc.find("## Environment variables");
  ASSERT_NE(section, std::string::npos) << "docs/cli.md has no \"## Environment variables\" section";
  const size_t start = doc.find("\n| variable |", section);
  ASSERT_NE(start, std::string::npos) << "no table in docs/cli.md's \"Environment variables\"";
  std::string table;
  std::istringstream in(doc.substr(start + 1));
  for (std::string line; std::getline(in, line) && !line.empty() && line[0] == '|';) table += line + "\n";
  EXPECT_EQ(table, knobs::markdown_table())
      << "docs/cli.md's table of environment variables differs from framework/core/knobs.cpp's; replace it with:\n"
      << knobs::markdown_table();
}

}  // namespace
