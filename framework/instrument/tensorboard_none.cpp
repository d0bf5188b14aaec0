// The TensorBoard writer of a build without protobuf: --tensorboard is then unsupported, and saying
// how to get it is the whole job (the constructor throws, so nothing else is ever reached).
#include "core/error.h"
#include "instrument/tensorboard.h"

namespace loupe::instrument {

struct TensorBoardWriter::Impl {};

bool tensorboard_available() { return false; }

std::string tensorboard_missing() {
  return "--tensorboard: this loupe was built without TensorBoard support (protobuf and Boost.CRC at build time); install "
         "libprotobuf-dev, protobuf-compiler and libboost-dev (apt-get install libprotobuf-dev protobuf-compiler "
         "libboost-dev) and rebuild";
}

TensorBoardWriter::TensorBoardWriter(const std::string&) { throw Error(tensorboard_missing()); }
TensorBoardWriter::~TensorBoardWriter() = default;
const std::string& TensorBoardWriter::path() const {
  static const std::string none;
  return none;
}
void TensorBoardWriter::scalars(int64_t, const std::vector<std::pair<std::string, double>>&) {}
void TensorBoardWriter::text(int64_t, const std::string&, const std::string&) {}
void TensorBoardWriter::begin_epoch(double) {}
void TensorBoardWriter::step(int64_t, int64_t, double, std::optional<double>) {}
void TensorBoardWriter::epoch(const EpochReport&) {}
void TensorBoardWriter::gpu_samples(const std::vector<GpuSample>&, double) {}
void TensorBoardWriter::hparams(const EpochReport&) {}
void TensorBoardWriter::flush() {}

}  // namespace loupe::instrument
