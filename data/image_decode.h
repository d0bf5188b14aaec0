// Decoding one image file into bytes: the small seam between the image-folder reader and
// stb_image. Two sources implement it, and CMake compiles one: image_decode_stb.cpp when
// libstb-dev is found, image_decode_none.cpp (every call fails with the fix) when it is not.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace loupe::data {

struct DecodedImage {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;  // height x width x channels (HWC), rows top to bottom
};

// False in a build without stb_image.
bool image_decode_available();

// Decodes a PNG or JPEG file (detected from its bytes, not its name) into `channels` channels:
// 1 = grey (from RGB as stb_image computes it: (77 R + 150 G + 29 B) >> 8), 3 = RGB (grey is
// repeated; alpha is dropped). Any failure is a loupe::Error that names the file and the reason.
// A file over kMaxImageFileBytes (image_check.h) is refused from its size, unread. Before
// stb_image sees the bytes, data/image_check.h checks them: a PNG's CRCs, zlib stream and
// Adler-32, and the dimensions of a PNG or JPEG, so neither a damaged file nor a hostile header gets
// through.
DecodedImage decode_image(const std::string& path, int channels);

}  // namespace loupe::data
