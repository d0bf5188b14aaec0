#include "instrument/counters.h"

namespace loupe::instrument {

namespace {
CounterSessionFactory& factory() {
  static CounterSessionFactory f = nullptr;
  return f;
}
}  // namespace

void register_counter_session_factory(CounterSessionFactory f) { factory() = f; }

std::unique_ptr<CounterSession> make_counter_session(std::string* why) {
  if (!factory()) {
    *why = "this loupe was built without CUDA";
    return nullptr;
  }
  return factory()(why);
}

}  // namespace loupe::instrument
