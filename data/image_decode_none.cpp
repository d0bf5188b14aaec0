// The decoder of a build without stb_image: image folders are then unsupported, and saying how
// to get them is the whole job.
#include "core/error.h"
#include "data/image_decode.h"

namespace loupe::data {

bool image_decode_available() { return false; }

DecodedImage decode_image(const std::string& path, int) {
  throw Error(path + ": loupe was built without stb_image, so it cannot read image folders; install "
              "libstb-dev (apt-get install libstb-dev) and rebuild");
}

}  // namespace loupe::data
