// core/knobs.h: the typed reads of the LOUPE_* environment variables refuse bad values (issue 17,
// point 4).
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "core/error.h"
#include "core/knobs.h"
#include "test_util.h"

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

// Unsets a variable for one scope (EnvVar sets one).
struct Unset {
  std::string name;
  std::optional<std::string> old;
  explicit Unset(const std::string& n) : name(n) {
    if (const char* o = std::getenv(n.c_str())) old = o;
    unsetenv(n.c_str());
    knobs::reload();
  }
  ~Unset() {
    if (old) setenv(name.c_str(), old->c_str(), 1);
    knobs::reload();
  }
};

TEST(Knobs, FlagsTakeZeroOrOne) {
  {
    Unset u("LOUPE_FUSE");
    EXPECT_TRUE(knobs::flag("LOUPE_FUSE"));  // the table's default
  }
  {
    Unset u("LOUPE_CONV_VERBOSE");
    EXPECT_FALSE(knobs::flag("LOUPE_CONV_VERBOSE"));
  }
  {
    EnvVar e("LOUPE_FUSE", "0");
    EXPECT_FALSE(knobs::flag("LOUPE_FUSE"));
  }
  {
    EnvVar e("LOUPE_LSTM_VERBOSE", "1");
    EXPECT_TRUE(knobs::flag("LOUPE_LSTM_VERBOSE"));
  }
  {
    EnvVar e("LOUPE_LSTM_VERBOSE", "0");  // before the table, any value turned it on
    EXPECT_FALSE(knobs::flag("LOUPE_LSTM_VERBOSE"));
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
    EXPECT_HAS(why, "the cores available");
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
    EXPECT_HAS(why, "loupe, loupe16, loupe8, standard, static, small_h or dynamic");
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
    for (const char* field : {k.read_by, k.meaning, k.fallback})  // a '|' would break the README's table
      EXPECT_EQ(std::string(field).find('|'), std::string::npos) << k.name;
    if (k.kind == knobs::Kind::Choice) EXPECT_GE(k.choices.size(), 2u) << k.name;
    if (k.kind == knobs::Kind::Integer) EXPECT_LE(k.min, k.max) << k.name;
    if (k.kind == knobs::Kind::Flag) EXPECT_EQ(k.fallback, std::string(k.on ? "1" : "0")) << k.name;
  }
}

}  // namespace
