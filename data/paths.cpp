// One search order for the data sets (paths.h).
#include "data/paths.h"

#include <cstdlib>
#include <filesystem>

#include "core/knobs.h"

namespace fs = std::filesystem;

namespace loupe::data {

std::vector<std::string> search_places(const std::string& rel) {
  std::vector<std::string> places;
  if (const std::optional<std::string> root = knobs::text("LOUPE_DATA")) places.push_back((fs::path(*root) / rel).string());
  const char* home = std::getenv("HOME");
  if (home && *home) places.push_back((fs::path(home) / ".cache/loupe" / rel).string());
  places.push_back((fs::path("data") / rel).string());
  return places;
}

std::optional<std::string> first_usable(const std::vector<std::string>& places,
                                        const std::function<bool(const std::string&)>& usable) {
  for (const std::string& p : places)
    if (usable(p)) return p;
  return std::nullopt;
}

std::string list_places(const std::vector<std::string>& places) {
  std::string s;
  for (const std::string& p : places) s += (s.empty() ? "" : ", ") + p;
  return s;
}

std::string not_found(const std::string& what, const std::vector<std::string>& places, const std::string& how) {
  return what + " was not found (looked in " + list_places(places) + ").\n" + how;
}

}  // namespace loupe::data
