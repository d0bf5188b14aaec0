// The decoder through stb_image (Debian's libstb-dev). Only its PNG and JPEG readers are compiled
// in, and STB_IMAGE_STATIC keeps its symbols inside this file, so libloupe exports none that could
// clash with a program's own copy of stb_image.
#include <cstdint>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/file_check.h"
#include "data/image_check.h"
#include "data/image_decode.h"

#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_NO_STDIO  // we read the file ourselves, for an error that says why it could not be read
#define STBI_FAILURE_USERMSG
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#include <stb_image.h>
#pragma GCC diagnostic pop

namespace loupe::data {

bool image_decode_available() { return true; }

DecodedImage decode_image(const std::string& path, int channels) {
  if (channels != 1 && channels != 3)
    throw Error(path + ": cannot decode to " + std::to_string(channels) + " channels (1 or 3)");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(path + ": is a directory, not an image");
  if (const std::string kind = what_else(path); !kind.empty()) throw Error(path + ": is " + kind + ", not an image");
  std::vector<uint8_t> bytes;
  uint64_t size = 0;
  static_assert(kMaxImageFileBytes <= INT32_MAX, "stb_image takes an int size");
  if (!read_capped(path, uint64_t(kMaxImageFileBytes), &bytes, &size))
    throw Error(path + ": " + with_commas(size) + " bytes, more than the " + with_commas(kMaxImageFileBytes) +
                " (288 MiB) loupe reads for one image (the largest it decodes, " + with_commas(kMaxImagePixels) +
                " pixels of 16-bit RGBA, takes 256 MiB uncompressed): not an image; replace or remove it");
  if (bytes.empty()) throw Error(path + ": empty file, not an image");
  // stb_image checks no CRC or Adler-32 and allocates what a header declares: the checks come first.
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "\x89PNG", 4) == 0) {
    check_png(path, bytes.data(), bytes.size());
  } else if (is_jpeg(bytes.data(), bytes.size())) {
    check_jpeg(path, bytes.data(), bytes.size());
  }
  int w = 0, h = 0, in_channels = 0;
  // stbi_failure_reason() is thread-local in this stb_image, so decoding in parallel is safe.
  stbi_uc* p = stbi_load_from_memory(bytes.data(), int(bytes.size()), &w, &h, &in_channels, channels);
  if (!p)
    throw Error(path + ": cannot decode the image (" + stbi_failure_reason() +
                "); the file is damaged or not a PNG or JPEG, the formats loupe reads: replace or remove it");
  DecodedImage img;
  img.width = w;
  img.height = h;
  img.channels = channels;
  img.pixels.assign(p, p + size_t(w) * size_t(h) * size_t(channels));
  stbi_image_free(p);
  return img;
}

}  // namespace loupe::data
