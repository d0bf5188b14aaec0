// An image-folder reader: one subfolder per class, PNG and JPEG files in each (the layout of
// torchvision's ImageFolder and Keras' image_dataset_from_directory):
//   dir/cat/001.png, dir/cat/002.jpg, ..., dir/dog/001.png, ...
// Decoding goes through stb_image, which is optional at build time (libstb-dev); without it
// image_folders_supported() is false and load_image_folder() throws with the fix.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace loupe::data {

struct ImageFolderData {
  std::string dir;
  std::vector<std::string> class_names;  // subfolder names, sorted (byte order) = label order
  int channels = 0, height = 0, width = 0;
  int64_t n = 0;
  std::vector<uint8_t> images;       // n x C x H x W (CHW planes, like CIFAR's layout)
  std::vector<uint8_t> labels;       // n, index into class_names
  std::vector<std::string> files;    // n, the file each image came from
  int64_t resized = 0;               // how many images had another size and were resized
};

// Reads dir/<class>/<image>.png|.jpg|.jpeg (extension case-insensitive; other files, and names
// starting with '.', skipped; files sorted by name within a class, classes in label order). Each
// image is converted to `channels` (1 = grey, 3 = RGB; alpha dropped) and, when its size differs,
// resized to height x width with bilinear interpolation (pixel centres aligned, as PIL, OpenCV
// and PyTorch's align_corners=false do; no antialiasing, so shrink large images beforehand).
// Errors are loupe::Error naming the path: dir missing, no class subfolders, a class with no
// images, more than 256 classes, a file that fails to decode (with stb_image's reason).
ImageFolderData load_image_folder(const std::string& dir, int channels, int height, int width);

// The class names of `dir` (its subfolders, sorted, without decoding anything), with the same
// checks as load_image_folder: dir missing, no class subfolders, more than 256 classes.
std::vector<std::string> image_folder_classes(const std::string& dir);

// False in a build without stb_image.
bool image_folders_supported();

// Bilinear resize of one HWC byte image (src_h x src_w x c) to dst_h x dst_w, written as CHW
// planes into dst (c x dst_h x dst_w). An exact copy (transposed to CHW) when the sizes match.
void resize_bilinear_to_chw(const uint8_t* src, int src_h, int src_w, int c, uint8_t* dst, int dst_h,
                            int dst_w);

}  // namespace loupe::data
