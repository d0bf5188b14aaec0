// Every LOUPE_* environment variable, in one table, and the only place the library reads them
// (docs/design.md, "Knobs and paths").
//
// A knob is read through a typed accessor named by the variable, e.g.
//   static const bool fuse = knobs::flag("LOUPE_FUSE");
// Each variable is read and parsed once, on first use, and the value (or the refusal) is kept; a
// value outside the ones the table allows is an Error naming the variable, the value and what it
// takes. An empty value counts as unset. A name that is not in the table, or an accessor of
// another kind than the variable's, is a programming error (Error).
//
// docs/cli.md's table of environment variables is markdown_table(), and the test_knobs test fails
// when the two differ or when a LOUPE_* variable read anywhere in the tree is missing here.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loupe::knobs {

enum class Kind {
  Flag,     // 0 or 1
  Integer,  // a whole number in [min, max]
  Choice,   // one of `choices`
  Text,     // any text: a directory, a file, a URL (not parsed)
};

struct Knob {
  const char* name;     // LOUPE_...
  Kind kind;
  const char* read_by;  // "the library", or the script or test that reads it
  const char* meaning;  // what it does, one sentence (docs/cli.md's "effect")
  const char* fallback; // what happens when it is unset (docs/cli.md's "default")
  const char* values = "";           // Text: what it holds, in words ("a directory")
  bool on = false;                   // Flag: its value when unset
  std::vector<std::string> choices;  // Choice: the allowed values
  int64_t min = 0, max = 0;          // Integer: the allowed range
};

// Every variable, in docs/cli.md's order.
const std::vector<Knob>& table();
// The table's entry for `name`; Error when it has none.
const Knob& find(const std::string& name);
// What a variable takes, in words: "0 or 1", "a whole number from 1 to 4096", "batch or seq"
// (markdown: the values in backticks).
std::string allowed(const Knob& k, bool markdown = false);

// Typed reads. Flag: the value, or the table's `on` when unset; the others: the value, or nothing
// when unset.
bool flag(const std::string& name);
std::optional<int64_t> integer(const std::string& name);
std::optional<std::string> choice(const std::string& name);
std::optional<std::string> text(const std::string& name);
// Whether LOUPE_VERBOSE asks for `what`'s choices ("conv", "lstm"): its value is `what` or "all".
bool verbose(const std::string& what);
// Forgets every value read, so that the next read sees the environment as it is now (for tests
// that set variables; sites that copied a value into a static keep their copy).
void reload();

// docs/cli.md's table: "| variable | read by | values | default | effect |" and one row a variable.
std::string markdown_table();

}  // namespace loupe::knobs
