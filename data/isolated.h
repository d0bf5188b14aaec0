// A reader of outside data that runs in a child process: for the readers of formats whose library
// is not hardened against damaged files (libhdf5 can read past its buffers on a damaged object
// header), so that such a file ends in a refusal, never in the crash of the run.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace loupe::data {

// Runs `read` in a forked child, which fills `floats` floats and hands them back through a pipe.
// A loupe::Error it throws is thrown here with its message; a child killed by a signal is refused
// in one sentence naming `file` ("... libhdf5 crashed on it: a damaged file"); `library` names
// the library in it. The child touches nothing of the parent's but memory: no CUDA, no threads.
std::vector<float> read_in_child(const std::string& file, const std::string& library, size_t floats,
                                 const std::function<void(float* out)>& read);

}  // namespace loupe::data
