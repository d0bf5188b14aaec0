// loupe_test_seams: the command (its own main and code, cli/) with the one seam the product lacks,
// LOUPE_TEST_FAULT, for the tests of a data-parallel world (tests/check_ddp.sh). It is never
// installed. Its ranks run it too: the launcher starts them as /proc/self/exe.
//   throw:RANK:STEP  rank RANK throws at step STEP of an epoch: the error must be reported, naming
//                    the rank, and every rank must end within seconds;
//   delay:RANK:MS    rank RANK sleeps MS ms as each training step begins, a straggler.
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "core/knobs.h"
#include "run/world.h"

namespace {

using namespace loupe;

class FaultInjection final : public train::Observer {
 public:
  explicit FaultInjection(int64_t step) : step_(step) {}
  void step_end(const train::StepInfo& info, train::Control&) override {
    if (info.epoch_step == step_) throw Error("a fault injected at step " + std::to_string(step_) + " (LOUPE_TEST_FAULT)");
  }

 private:
  int64_t step_;
};

// The sleep comes before the batch is fetched, so the rank's data wait holds it as a slow input
// pipeline's would: resident data's wait is the host's own time, which judges the straggler
// without --busy too (after the step it would fall outside every measured part of it); with --busy
// its peers' GPUs show the wait in NCCL.
class DelayInjection final : public train::Observer {
 public:
  explicit DelayInjection(double ms) : ms_(ms) {}
  void fetch_begin(const train::StepInfo&) override {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms_));
  }

 private:
  double ms_;
};

std::unique_ptr<train::Observer> inject_fault(const std::string& f, const char* spec, const run::World& world) {
  int rank = -1;
  long long step = -1;
  if (std::sscanf(spec, "%d:%lld", &rank, &step) != 2 || rank < 0 || step < 1)
    throw Error("LOUPE_TEST_FAULT takes throw:RANK:STEP (e.g. throw:1:20), got '" + f + "'");
  if (rank != world.rank()) return nullptr;
  return std::make_unique<FaultInjection>(step);
}

std::unique_ptr<train::Observer> inject_delay(const std::string& f, const char* spec, const run::World& world) {
  int rank = -1;
  double ms = -1;
  char extra = 0;
  // At most a second, so that Ctrl-C still stops a rank within one.
  if (std::sscanf(spec, "%d:%lf%c", &rank, &ms, &extra) != 2 || rank < 0 || !(ms > 0) || ms > 1000)
    throw Error("LOUPE_TEST_FAULT takes delay:RANK:MS (e.g. delay:1:5; 0 < MS <= 1000), got '" + f + "'");
  if (rank >= world.size())
    throw Error("LOUPE_TEST_FAULT names rank " + std::to_string(rank) + " of a world of " +
                std::to_string(world.size()) + " (ranks 0.." + std::to_string(world.size() - 1) + ")");
  if (rank != world.rank()) return nullptr;
  return std::make_unique<DelayInjection>(ms);
}

std::vector<std::unique_ptr<train::Observer>> test_fault(const run::World* world) {
  std::vector<std::unique_ptr<train::Observer>> out;
  if (!world) return out;  // a data-parallel world's seam: inert in one process
  const std::optional<std::string> f = knobs::text("LOUPE_TEST_FAULT");
  if (!f) return out;
  std::unique_ptr<train::Observer> o;
  if (f->rfind("throw:", 0) == 0) o = inject_fault(*f, f->c_str() + 6, *world);
  else if (f->rfind("delay:", 0) == 0) o = inject_delay(*f, f->c_str() + 6, *world);
  else throw Error("LOUPE_TEST_FAULT takes throw:RANK:STEP or delay:RANK:MS (e.g. throw:1:20, delay:1:5), got '" + *f + "'");
  if (o) out.push_back(std::move(o));
  return out;
}

// Before main (cli/loupe_main.cpp's, the product's own), as the library's backends register.
struct Registrar {
  Registrar() { cli::set_test_observers(test_fault); }
} g_registrar;

}  // namespace
