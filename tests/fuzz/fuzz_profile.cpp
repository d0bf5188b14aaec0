// A profile's JSON read back (instrument::profile_from_json, on nlohmann-json) and, accepted, its
// step predicted on another GPU (instrument::predict) and printed: every figure finite.
#include <cmath>
#include <string>

#include "core/error.h"
#include "fuzz_util.h"
#include "instrument/peak.h"
#include "instrument/predict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    loupe::instrument::Profile p =
        loupe::instrument::profile_from_json(std::string(reinterpret_cast<const char*>(data), size));
    p.gpu = true;  // a CPU profile is refused by predict(); the rows are what is under test
    const auto h100 = loupe::instrument::datasheet("H100"), h200 = loupe::instrument::datasheet("H200");
    const loupe::instrument::Prediction pr = loupe::instrument::predict(p, *h100, *h200, p.ceilings.precision);
    if (!std::isfinite(pr.step_to) || pr.step_to < 0) __builtin_trap();
    (void)loupe::instrument::prediction_text(pr);
    loupe::fuzz::accepted("profile");
  } catch (const loupe::Error& e) {
    loupe::fuzz::rejected(e);
  }
  return 0;
}
