#include "data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/thread_pool.h"
#include "data/image_decode.h"

namespace fs = std::filesystem;

namespace loupe::data {
namespace {

// Names starting with '.' (.DS_Store, .ipynb_checkpoints, editors' files) are never classes or images.
bool hidden(const fs::path& p) { return p.filename().string().rfind('.', 0) == 0; }

bool is_image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  for (char& ch : ext) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

// The entries of `dir` that pass `keep`, sorted by name (byte order, so the same on every system:
// directory iteration order is not).
template <class Keep>
std::vector<fs::path> sorted_entries(const fs::path& dir, Keep keep) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (!hidden(it->path()) && keep(*it)) out.push_back(it->path());
  if (ec) throw Error(dir.string() + ": cannot list the folder: " + ec.message());
  std::sort(out.begin(), out.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename().string() < b.filename().string(); });
  return out;
}

// One output coordinate's two source neighbours and the weight of the second, with pixel centres
// aligned: source position (d + 0.5) * src / dst - 0.5, clamped to the image at the borders.
struct Tap {
  int i0, i1;
  float w1;
};

std::vector<Tap> taps(int src, int dst) {
  std::vector<Tap> t(static_cast<size_t>(dst));
  const double scale = double(src) / dst;
  for (int d = 0; d < dst; ++d) {
    double s = std::clamp((d + 0.5) * scale - 0.5, 0.0, double(src - 1));
    int i0 = int(s);
    t[size_t(d)] = Tap{i0, std::min(i0 + 1, src - 1), float(s - i0)};
  }
  return t;
}

}  // namespace

bool image_folders_supported() { return image_decode_available(); }

std::vector<std::string> image_folder_classes(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error(dir + ": image folder not found (expected one subfolder per class holding .png or .jpg "
                "files, e.g. " + (fs::path(dir) / "cat" / "001.png").string() + ")");
  auto is_dir = [](const fs::directory_entry& e) {
    std::error_code ec2;
    return e.is_directory(ec2);
  };
  std::vector<std::string> names;
  for (const fs::path& p : sorted_entries(dir, is_dir)) names.push_back(p.filename().string());
  if (names.empty())
    throw Error(dir + ": no class subfolders; an image folder holds one subfolder per class (e.g. " +
                (fs::path(dir) / "cat" / "001.png").string() + ")");
  if (names.size() > 256)
    throw Error(dir + ": " + std::to_string(names.size()) + " class subfolders, but labels are bytes, so at "
                "most 256 classes");
  return names;
}

void resize_bilinear_to_chw(const uint8_t* src, int src_h, int src_w, int c, uint8_t* dst, int dst_h,
                            int dst_w) {
  const size_t plane = size_t(dst_h) * size_t(dst_w);
  if (src_h == dst_h && src_w == dst_w) {
    for (int y = 0; y < dst_h; ++y)
      for (int x = 0; x < dst_w; ++x)
        for (int k = 0; k < c; ++k) dst[k * plane + size_t(y) * dst_w + x] = src[(size_t(y) * src_w + x) * c + k];
    return;
  }
  const std::vector<Tap> ty = taps(src_h, dst_h), tx = taps(src_w, dst_w);
  for (int y = 0; y < dst_h; ++y) {
    const Tap& a = ty[size_t(y)];
    const uint8_t* r0 = src + size_t(a.i0) * src_w * c;
    const uint8_t* r1 = src + size_t(a.i1) * src_w * c;
    for (int x = 0; x < dst_w; ++x) {
      const Tap& b = tx[size_t(x)];
      for (int k = 0; k < c; ++k) {
        float top = r0[b.i0 * c + k] + b.w1 * (r0[b.i1 * c + k] - r0[b.i0 * c + k]);
        float bot = r1[b.i0 * c + k] + b.w1 * (r1[b.i1 * c + k] - r1[b.i0 * c + k]);
        float v = top + a.w1 * (bot - top);
        dst[k * plane + size_t(y) * dst_w + x] = uint8_t(std::clamp(std::lround(v), 0L, 255L));
      }
    }
  }
}

ImageFolderData load_image_folder(const std::string& dir, int channels, int height, int width) {
  if (channels != 1 && channels != 3)
    throw Error(dir + ": images can be read as 1 (grey) or 3 (RGB) channels, not " + std::to_string(channels));
  if (height < 1 || width < 1)
    throw Error(dir + ": bad image size " + std::to_string(height) + "x" + std::to_string(width));
  // Before touching the folder: without stb_image nothing can be read, and that is the fix to say.
  if (!image_folders_supported()) decode_image(dir, channels);
  ImageFolderData d;
  d.dir = dir;
  d.channels = channels;
  d.height = height;
  d.width = width;
  d.class_names = image_folder_classes(dir);
  for (size_t c = 0; c < d.class_names.size(); ++c) {
    const fs::path class_dir = fs::path(dir) / d.class_names[c];
    const std::vector<fs::path> images = sorted_entries(class_dir, [](const fs::directory_entry& e) {
      std::error_code ec;
      return !e.is_directory(ec) && is_image_name(e.path());
    });
    if (images.empty())
      throw Error(class_dir.string() + ": class folder without images (.png, .jpg or .jpeg); remove it or "
                  "add its images");
    for (const fs::path& p : images) {
      d.files.push_back(p.string());
      d.labels.push_back(uint8_t(c));
    }
  }
  d.n = int64_t(d.files.size());

  // Decode in parallel: the files are independent, and stb_image keeps no shared state.
  const size_t bytes = size_t(channels) * size_t(height) * size_t(width);
  d.images.resize(size_t(d.n) * bytes);
  std::vector<uint8_t> resized(size_t(d.n), 0);
  parallel_for(0, d.n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const DecodedImage img = decode_image(d.files[size_t(i)], channels);
      resize_bilinear_to_chw(img.pixels.data(), img.height, img.width, channels, d.images.data() + size_t(i) * bytes,
                             height, width);
      resized[size_t(i)] = img.height != height || img.width != width;
    }
  });
  d.resized = std::count(resized.begin(), resized.end(), uint8_t(1));
  return d;
}

}  // namespace loupe::data
