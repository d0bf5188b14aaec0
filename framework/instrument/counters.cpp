#include "instrument/counters.h"

#include "instrument/cuda_factory.h"

namespace loupe::instrument {

void register_counter_session_factory(CounterSessionFactory f) { CudaFactory<CounterSession>::set(f); }

// The counters' maker gives its own reasons (counters_cuda.cu): nothing added to them here.
std::unique_ptr<CounterSession> make_counter_session(std::string* why) {
  return CudaFactory<CounterSession>::make(why, "this loupe was built without CUDA", nullptr);
}

}  // namespace loupe::instrument
