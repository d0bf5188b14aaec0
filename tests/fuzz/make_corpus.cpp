// Writes the seed corpora of the fuzz targets: small valid files of each format, and the crafted
// bad ones of docs/reliability.md (a checkpoint whose tensor record is shorter than its shape, an
// IDX .gz that inflates far beyond its header, checkpoint epochs "abc", 2147483647 and -5, PNGs
// with a bad CRC or Adler-32, images of the wrong size, ...). The committed corpora in
// tests/fuzz/corpus were made with it (plus what the fuzzers found, in files named crash-* or
// slow-*):
//   build/tests/fuzz/fuzz_make_corpus tests/fuzz/corpus
// Each file's expected outcomes are in tests/fuzz/corpus/<target>.expect: a file added here gets
// its line there (docs/fuzzing.md, "Expected outcomes").
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "../png_writer.h"
#include "fuzz_models.h"
#include "train/checkpoint.h"
#include "train/checkpoint_file.h"

namespace fs = std::filesystem;
using namespace loupe;
using test::Bytes;
using test::chunk;
using test::make_png;
using test::Png;
using test::put32;

namespace {

fs::path g_root;
int g_files = 0;

void write(const std::string& target, const std::string& name, const Bytes& b) {
  const fs::path p = g_root / target / name;
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  ++g_files;
}

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

Bytes gzip(const Bytes& in) {
  z_stream zs{};
  deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY);
  Bytes out(deflateBound(&zs, uLong(in.size())));
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.avail_in = uInt(in.size());
  zs.next_out = out.data();
  zs.avail_out = uInt(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// ---- IDX -----------------------------------------------------------------------------------------

Bytes idx(const std::vector<uint32_t>& dims, size_t data_bytes, uint8_t type = 0x08) {
  Bytes b = {0, 0, type, uint8_t(dims.size())};
  for (uint32_t d : dims) put32(b, d);
  for (size_t k = 0; k < data_bytes; ++k) b.push_back(uint8_t(k * 31 % 10));
  return b;
}

void idx_corpora() {
  const Bytes images = idx({3, 4, 4}, 48), labels = idx({10}, 10);
  write("idx", "images_3x4x4", images);
  write("idx", "labels_10", labels);
  write("idx", "images_10x10_wrong_size_for_mnist", idx({2, 10, 10}, 200));
  write("idx", "truncated_data", idx({3, 4, 4}, 20));
  Bytes trailing = images;
  trailing.insert(trailing.end(), {1, 2, 3, 4, 5});
  write("idx", "trailing_bytes", trailing);
  write("idx", "type_float32", idx({2, 2}, 16, 0x0D));
  write("idx", "ndim_0", {0, 0, 8, 0});
  write("idx", "ndim_5", idx({1, 1, 1, 1, 1}, 1));
  write("idx", "zero_dim", idx({3, 0, 4}, 0));
  write("idx", "dims_over_2_31", idx({65536, 65536, 2}, 0));
  write("idx", "header_cut", {0, 0, 8, 3, 0, 0});
  write("idx", "empty", {});
  write("idx", "not_idx", text("P5\n28 28\n255\n"));

  write("idx_gz", "images_3x4x4.gz", gzip(images));
  write("idx_gz", "labels_10.gz", gzip(labels));
  // The bombs: a header declaring 64 bytes (and 1 byte) in front of a stream of 1 MiB (and 4 MiB).
  Bytes bomb = idx({4, 4, 4}, 0);
  bomb.resize(bomb.size() + (1 << 20), 0);
  write("idx_gz", "bomb_64_declared_1MiB_inflated.gz", gzip(bomb));
  Bytes bomb1 = idx({1}, 0);
  bomb1.resize(bomb1.size() + (4 << 20), 7);
  write("idx_gz", "bomb_1_declared_4MiB_inflated.gz", gzip(bomb1));
  // A header declaring 2^31 bytes of images, the most it may, in a 4 KB file (docs/fuzzing.md,
  // "Size caps"): over 50 times the file's size and 64 MiB, so refused before inflating (the 4 MiB
  // of zeros after it stand for the 2 GiB a hostile file of 2.1 MB holds).
  Bytes huge = idx({32768, 256, 256}, 0);
  huge.resize(huge.size() + (4 << 20), 0);
  write("idx_gz", "declares_2GiB_in_4KB.gz", gzip(huge));
  Bytes cut = gzip(images);
  cut.resize(cut.size() / 2);
  write("idx_gz", "truncated.gz", cut);
  Bytes garbage = gzip(images);
  garbage.insert(garbage.end(), {'j', 'u', 'n', 'k'});
  write("idx_gz", "trailing_garbage.gz", garbage);
  Bytes two = gzip(Bytes(images.begin(), images.begin() + 20));
  const Bytes rest = gzip(Bytes(images.begin() + 20, images.end()));
  two.insert(two.end(), rest.begin(), rest.end());
  write("idx_gz", "two_members.gz", two);
  Bytes crc = gzip(images);
  crc[crc.size() - 6] ^= 0xff;  // the gzip trailer's CRC-32
  write("idx_gz", "bad_crc.gz", crc);
  write("idx_gz", "not_idx_inside.gz", gzip(text("hello, world\n")));
  write("idx_gz", "magic_only.gz", {0x1f, 0x8b});
}

// ---- CIFAR-10 ------------------------------------------------------------------------------------

void cifar_corpora() {
  Bytes two;
  for (int r = 0; r < 2; ++r) {
    two.push_back(uint8_t(r * 7));
    for (int k = 0; k < 3072; ++k) two.push_back(uint8_t(k + r));
  }
  write("cifar", "batch_2_records", two);
  Bytes label10(3073, 5);
  label10[0] = 10;
  write("cifar", "label_10_cifar100", label10);
  write("cifar", "partial_record", Bytes(3073 + 100, 1));
  write("cifar", "meta_ok", text("airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n\n"));
  write("cifar", "meta_9_names", text("a\nb\nc\nd\ne\nf\ng\nh\ni\n"));
  write("cifar", "meta_crlf_blank_lines", text("a\r\n\r\nb\r\nc\r\nd\r\n  \r\ne\r\nf\r\ng\r\nh\r\ni\r\nj"));
}

// ---- text ----------------------------------------------------------------------------------------

void text_corpora() {
  write("text", "reviews",
        text("This movie was great! <br /><br />I'd see it again, and again.\n"
             "Terrible acting; the plot made no sense at all.\n"
             "A 10/10 film: great, great, great.\n"
             "Not great. Not terrible. 'Twas fine, I guess...\n"
             "<br />Great acting<br / >and<br/>music.\n"));
  write("text", "unicode", text("Café naïve façade — 日本語 ok\nÀ LA CARTE, déjà vu 😀\n"));
  write("text", "invalid_utf8_cut", text("abc\xe6\x97"));
  write("text", "invalid_utf8_overlong", text("a\xc0\x80z"));
  write("text", "invalid_utf8_surrogate", text("a\xed\xa0\x80z"));
  write("text", "invalid_utf8_above_10ffff", text("a\xf4\x90\x80\x80z"));
  write("text", "invalid_utf8_lone_continuation", text("a\x80z"));
  write("text", "empty", {});
  write("text", "apostrophes", text("''' ' 'tis don't rock'n'roll\n'\n"));
  std::string long_line;
  for (int i = 0; i < 200; ++i) long_line += "w" + std::to_string(i % 37) + " ";
  write("text", "long_line", text(long_line + "\n" + long_line + "\nshort\nx\n"));
  write("text", "prose_for_char_lstm",
        text("PREFACE\n\nSupposing that Truth is a woman--what then? Is there not ground for suspecting that all "
             "philosophers, in so far as they have been dogmatists, have failed to understand women.\n"));
}

// ---- images --------------------------------------------------------------------------------------

// h rows of `row_bytes` bytes (filter 0), pixel bytes ramping.
Bytes rows(int h, int row_bytes) {
  Bytes raw;
  for (int y = 0; y < h; ++y) {
    raw.push_back(0);
    for (int x = 0; x < row_bytes; ++x) raw.push_back(uint8_t(y * 37 + x * 11));
  }
  return raw;
}

Bytes png_of(int w, int h, int color, int channels, int depth = 8) {
  Png p;
  p.w = w, p.h = h, p.color = color, p.depth = depth;
  p.raw = rows(h, (w * channels * depth + 7) / 8);
  return make_png(p);
}

// A 16x8 grey baseline JPEG made by hand (as test_image_folder's): two 8x8 blocks, DC only.
Bytes tiny_jpeg(int h = 8, int w = 16) {
  Bytes j = {0xff, 0xd8, 0xff, 0xdb, 0x00, 0x43, 0x00};
  j.insert(j.end(), 64, 1);
  j.insert(j.end(), {0xff, 0xc0, 0x00, 0x0b, 8, uint8_t(h >> 8), uint8_t(h), uint8_t(w >> 8), uint8_t(w), 1, 1, 0x11, 0});
  j.insert(j.end(), {0xff, 0xc4, 0x00, 0x15, 0x00, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 10});
  j.insert(j.end(), {0xff, 0xc4, 0x00, 0x14, 0x10, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00});
  j.insert(j.end(), {0xff, 0xda, 0x00, 0x08, 1, 1, 0x00, 0, 63, 0});
  j.insert(j.end(), {0x20, 0x05, 0xff, 0x00, 0x7f});
  j.insert(j.end(), {0xff, 0xd9});
  return j;
}

void image_corpora() {
  // Valid: every colour type, sub-byte and 16-bit depths, a palette, interlacing, many IDATs.
  write("image", "grey_4x4.png", png_of(4, 4, 0, 1));
  write("image", "rgb_3x2.png", png_of(3, 2, 2, 3));
  write("image", "grey_alpha_2x2.png", png_of(2, 2, 4, 2));
  write("image", "rgba_2x3.png", png_of(2, 3, 6, 4));
  write("image", "grey_1bit_9x2.png", png_of(9, 2, 0, 1, 1));
  write("image", "rgb_16bit_2x2.png", png_of(2, 2, 2, 3, 16));
  write("image", "wrong_size_10x10_for_28x28.png", png_of(10, 10, 0, 1));
  Png pal;
  pal.w = 3, pal.h = 2, pal.depth = 2, pal.color = 3;
  pal.raw = {0, 0b00011000, 0, 0b10010000};
  pal.plte = {10, 20, 30, 40, 50, 60, 70, 80, 90};
  pal.before_idat = {{"tRNS", {255, 128}}};
  write("image", "palette_2bit_trns.png", make_png(pal));
  Png inter;
  inter.w = 5, inter.h = 3, inter.interlace = 1;
  static const int pass[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                 {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
  for (const auto& p : pass) {
    if (p[0] >= inter.w) continue;
    for (int y = p[1]; y < inter.h; y += p[3]) {
      inter.raw.push_back(0);
      for (int x = p[0]; x < inter.w; x += p[2]) inter.raw.push_back(uint8_t(y * 5 + x));
    }
  }
  write("image", "interlaced_5x3.png", make_png(inter));
  Png many;
  many.w = 6, many.h = 5, many.color = 2, many.raw = rows(5, 18), many.idat_size = 7;
  many.before_idat = {{"tEXt", text(std::string("Comment\0fuzz", 12))}};
  write("image", "many_idat_text.png", make_png(many));
  Bytes after = png_of(2, 2, 0, 1);
  after.insert(after.end(), {'t', 'r', 'a', 'i', 'l'});
  write("image", "bytes_after_iend.png", after);
  Png filters;  // every filter type once (Sub, Up, Average, Paeth)
  filters.w = 3, filters.h = 4, filters.color = 0;
  filters.raw = {1, 10, 20, 30, 2, 1, 2, 3, 3, 5, 5, 5, 4, 9, 8, 7};
  write("image", "filters_1_to_4.png", make_png(filters));
  write("image", "tiny.jpg", tiny_jpeg());

  // Damaged or hostile.
  Bytes crc = png_of(4, 4, 0, 1);
  crc[crc.size() - 13] ^= 1;
  write("image", "bad_idat_crc.png", crc);
  Png pixel;
  pixel.raw = rows(4, 4), pixel.level = 0, pixel.edit_z = [](Bytes& z) { z[8] ^= 0x40; };
  write("image", "bad_adler_pixel_changed.png", make_png(pixel));
  Png adler;
  adler.raw = rows(4, 4), adler.edit_z = [](Bytes& z) { z.back() ^= 1; };
  write("image", "bad_adler.png", make_png(adler));
  Png longer;
  longer.h = 2, longer.raw = rows(4, 4);
  write("image", "more_data_than_ihdr.png", make_png(longer));
  Png shorter;
  shorter.h = 8, shorter.raw = rows(4, 4);
  write("image", "less_data_than_ihdr.png", make_png(shorter));
  Bytes no_iend = png_of(4, 4, 0, 1);
  no_iend.resize(no_iend.size() - 12);
  write("image", "no_iend.png", no_iend);
  Bytes cut = png_of(8, 8, 2, 3);
  cut.resize(cut.size() / 2);
  write("image", "cut_in_half.png", cut);
  Bytes sig = png_of(2, 2, 0, 1);
  sig[4] = '\n';
  write("image", "text_mode_signature.png", sig);
  Png huge;
  huge.w = 16000, huge.h = 16000, huge.raw = Bytes(16001, 0);
  write("image", "huge_16000x16000.png", make_png(huge));
  Png wide;
  wide.w = 20000, wide.h = 1, wide.raw = Bytes(20001, 0);
  write("image", "wide_20000x1.png", make_png(wide));
  Png big;  // within the limits, declaring 32 MiB of pixels over 100 bytes of data
  big.w = 8192, big.h = 4096, big.raw = Bytes(8193, 0);
  write("image", "declares_8192x4096_holds_one_row.png", make_png(big));
  Png nopal;
  nopal.color = 3, nopal.raw = rows(4, 4);
  write("image", "palette_without_plte.png", make_png(nopal));
  Png cgbi = many;
  Bytes cg = make_png(cgbi);
  Bytes cgchunk;
  chunk(cgchunk, "CgBI", {0x50, 0, 0x20, 2});
  cg.insert(cg.begin() + 8, cgchunk.begin(), cgchunk.end());
  write("image", "cgbi_first.png", cg);
  write("image", "jpeg_declares_4096x4096.jpg", tiny_jpeg(4096, 4096));
  write("image", "jpeg_declares_30000x16.jpg", tiny_jpeg(30000, 16));
  Bytes jcut = tiny_jpeg();
  jcut.resize(jcut.size() - 6);
  write("image", "jpeg_cut.jpg", jcut);
  write("image", "not_an_image.png", text("<html>404 Not Found</html>"));
}

// ---- checkpoints ---------------------------------------------------------------------------------

// The models of fuzz_checkpoint.cpp (fuzz_models.h).
using Model = loupe::fuzz::FuzzModel;

Bytes read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Saves m, lets `edit` change the file's contents, writes it back with a valid CRC, and stores it.
void checkpoint(const std::string& name, const Model& m, bool with_opt,
                const std::function<void(CheckpointFile&)>& edit = {}) {
  const fs::path tmp = fs::temp_directory_path() / ("loupe_make_corpus_" + name);
  train::save_checkpoint(tmp.string(), *m.model, with_opt ? m.opt.get() : nullptr, {m.name, 3, 42, 1000});
  if (edit) {
    CheckpointFile f = read_checkpoint_file(tmp.string());
    edit(f);
    write_checkpoint_file(tmp.string(), f);
  }
  write("checkpoint", name, read_file(tmp));
  fs::remove(tmp);
}

void set_meta(CheckpointFile& f, const std::string& key, const std::string& value) {
  for (auto& kv : f.meta)
    if (kv.first == key) {
      kv.second = value;
      return;
    }
  f.meta.emplace_back(key, value);
}

// Bytes of the format written by hand, sealed with the CRC and end marker.
Bytes sealed(Bytes body) {
  const uint32_t crc = uint32_t(crc32(0, body.data(), uInt(body.size())));
  for (int i = 0; i < 4; ++i) body.push_back(uint8_t(crc >> (8 * i)));
  for (char c : std::string("LOUPEEND")) body.push_back(uint8_t(c));
  return body;
}

void le32(Bytes& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(uint8_t(v >> (8 * i)));
}

Bytes header(const std::string& model) {
  Bytes b = text("LOUPECKP");
  le32(b, 1);
  le32(b, uint32_t(model.size()));
  b.insert(b.end(), model.begin(), model.end());
  return b;
}

void checkpoint_corpora() {
  const Model ft = loupe::fuzz::fasttext_model(), cnn = loupe::fuzz::tiny_cnn_model();
  checkpoint("fasttext_adam.ckpt", ft, true);
  checkpoint("fasttext_no_optimizer.ckpt", ft, false);
  checkpoint("tiny_cnn_rmsprop.ckpt", cnn, true);
  // The record shorter than its shape (a valid CRC): copied past its end on the old code.
  checkpoint("record_shorter_than_shape.ckpt", ft, true, [](CheckpointFile& f) {
    for (auto& r : f.records)
      if (r.name == "model/fc.weight") r.bytes.resize(r.bytes.size() - 8);
  });
  checkpoint("record_longer_than_shape.ckpt", cnn, true, [](CheckpointFile& f) { f.records[0].bytes.resize(f.records[0].bytes.size() + 4); });
  checkpoint("shape_mismatch.ckpt", ft, true, [](CheckpointFile& f) { f.records[0].shape = {50, 4}; });
  checkpoint("shape_negative.ckpt", ft, true, [](CheckpointFile& f) { f.records[0].shape = {-4, -50}; });
  checkpoint("dtype_99.ckpt", cnn, true, [](CheckpointFile& f) { f.records[1].dtype = 99; });
  checkpoint("record_missing.ckpt", cnn, true, [](CheckpointFile& f) { f.records.erase(f.records.begin() + 2); });
  checkpoint("other_model.ckpt", ft, true, [](CheckpointFile& f) { f.model = "mnist_mlp"; });
  checkpoint("other_optimizer.ckpt", ft, true, [](CheckpointFile& f) { set_meta(f, "optimizer", "SGD"); });
  for (const char* epoch : {"abc", "2147483647", "-5", "", "3x", " 3", "1000001", "99999999999999999999"})
    checkpoint(std::string("epoch_") + (*epoch ? epoch : "empty") + ".ckpt", ft, true,
               [&](CheckpointFile& f) { set_meta(f, "epoch", epoch); });
  checkpoint("optimizer_steps_2_53_plus_1.ckpt", ft, true, [](CheckpointFile& f) { set_meta(f, "optimizer_steps", "9007199254740993"); });
  checkpoint("seed_negative.ckpt", cnn, true, [](CheckpointFile& f) { set_meta(f, "seed", "-1"); });
  checkpoint("rng_offset_2_64.ckpt", cnn, true, [](CheckpointFile& f) { set_meta(f, "rng_offset", "18446744073709551616"); });

  Bytes ok = read_file(g_root / "checkpoint" / "tiny_cnn_rmsprop.ckpt");
  Bytes crc = ok;
  crc[40] ^= 1;
  write("checkpoint", "bad_crc.ckpt", crc);
  write("checkpoint", "truncated.ckpt", Bytes(ok.begin(), ok.begin() + std::ptrdiff_t(ok.size() / 2)));
  Bytes v2 = ok;
  v2[8] = 2;
  write("checkpoint", "version_2.ckpt", v2);
  write("checkpoint", "magic_only.ckpt", text("LOUPECKP"));
  write("checkpoint", "foreign.ckpt", text("PK\x03\x04 a zip file, not a checkpoint"));
  Bytes extra(ok.begin(), ok.end() - 12);  // the body without its CRC and end marker
  extra.insert(extra.end(), {'j', 'u', 'n', 'k'});
  write("checkpoint", "bytes_after_last_record.ckpt", sealed(extra));
  // Counts and lengths that point past the end: each must be refused before anything is allocated.
  Bytes meta_count = header("tiny_cnn");
  le32(meta_count, 0xffffffffu);
  write("checkpoint", "meta_count_4G.ckpt", sealed(meta_count));
  Bytes rank = header("tiny_cnn");
  le32(rank, 0);            // no metadata
  le32(rank, 1);            // one record
  le32(rank, 10);
  for (char c : std::string("model/conv")) rank.push_back(uint8_t(c));
  le32(rank, 0);            // dtype
  le32(rank, 0x20000000u);  // rank: 4 GiB of dimensions
  write("checkpoint", "record_rank_huge.ckpt", sealed(rank));
  Bytes name = header("tiny_cnn");
  le32(name, 0);
  le32(name, 1);
  le32(name, 0x7fffffffu);  // a record name of 2 GiB
  write("checkpoint", "record_name_2G.ckpt", sealed(name));
  Bytes model_len = text("LOUPECKP");
  le32(model_len, 1);
  le32(model_len, 0xfffffff0u);
  write("checkpoint", "model_name_4G.ckpt", sealed(model_len));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR   (writes OUTPUT_DIR/<target>/<file>)\n", argv[0]);
    return 2;
  }
  g_root = argv[1];
  try {
    idx_corpora();
    cifar_corpora();
    text_corpora();
    image_corpora();
    checkpoint_corpora();
  } catch (const Error& e) {
    std::fprintf(stderr, "fuzz_make_corpus: %s\n", e.what());
    return 1;
  }
  std::printf("wrote %d files under %s\n", g_files, argv[1]);
  return 0;
}
