#include "run/data.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "core/text.h"
#include "core/philox.h"
#include "data/cifar.h"
#include "data/cifar_dataset.h"
#include "data/idx.h"
#include "data/imdb.h"
#include "data/image_folder.h"
#include "data/npy.h"
#include "data/synthetic.h"
#include "models/registry.h"

namespace fs = std::filesystem;

namespace loupe::run {

namespace {
// Images and labels as stored, whatever the source.
struct Raw {
  std::string name, dir;
  Shape sample;
  int64_t n_train = 0, n_test = 0;
  std::vector<uint8_t> train_images, train_labels, test_images, test_labels;
  std::string note;  // appended to the data line
};

// Synthetic data with the real shapes (data/synthetic.h): random, or with classes to learn.
Raw synthetic(const std::string& name, data::SyntheticKind kind, Shape sample, int64_t n_train, int64_t n_test) {
  data::SyntheticImages g = data::synthetic_images(kind, sample, n_train, n_test);
  return Raw{std::string("synthetic ") + (kind == data::SyntheticKind::Learnable ? "learnable " : "") + name +
                 "-shaped data",
             "memory", sample, n_train, n_test, std::move(g.train_images), std::move(g.train_labels),
             std::move(g.test_images), std::move(g.test_labels), ""};
}

// The sample shape of the models whose recipe reads `dataset`: image folders are resized to it,
// and MNIST-format files, which are not, must have it.
Shape model_sample(const std::string& dataset) { return dataset == "mnist" ? Shape{28, 28} : Shape{3, 32, 32}; }

// Those models by name, for a message: "mnist_mlp and mnist_cnn".
std::string models_reading(const std::string& dataset) {
  std::vector<std::string> names;
  for (const models::ModelInfo& m : models::all_models())
    if (m.recipe.dataset == dataset) names.push_back(m.name);
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return s;
}

Raw mnist(const std::string& given) {
  std::string dir = given;
  if (dir.empty()) {
    auto found = data::find_default_mnist_dir();
    if (!found) throw Error("no data set found.\n" + data::how_to_get_data());
    dir = *found;
  }
  data::MnistData m = data::load_mnist(dir);
  // The models take 28x28 and nothing resizes an IDX set: without this, a 10x10 set failed in the
  // first step, in a matmul whose shapes named no file.
  const Shape want = model_sample("mnist");
  if (m.rows != want[0] || m.cols != want[1])
    throw Error(m.train_images_file + ": its images are " + std::to_string(m.rows) + "x" + std::to_string(m.cols) +
                ", but " + models_reading("mnist") + " take " + std::to_string(want[0]) + "x" + std::to_string(want[1]) +
                " images and MNIST-format files are not resized; give a " + std::to_string(want[0]) + "x" +
                std::to_string(want[1]) + " set, or the images as image folders (DIR/train/<class>/*.png and "
                "DIR/test/<class>/*.png), which are resized");
  return Raw{m.name, m.dir, Shape{m.rows, m.cols}, m.n_train, m.n_test, std::move(m.train_images),
             std::move(m.train_labels), std::move(m.test_images), std::move(m.test_labels), ""};
}

Raw cifar10(const std::string& given) {
  std::string dir = given;
  if (dir.empty()) {
    auto found = data::find_default_cifar10_dir();
    if (!found)
      throw Error(data::cifar10_not_found());
    dir = *found;
  }
  data::CifarData c = data::load_cifar10(dir);
  return Raw{"CIFAR-10", c.dir, Shape{3, 32, 32}, c.n_train, c.n_test, std::move(c.train_images),
             std::move(c.train_labels), std::move(c.test_images), std::move(c.test_labels), ""};
}

// --data DIR holding train/ and test/: image folders (one subfolder per class) in place of the
// recipe's data set, read at its sample shape so the reference model fits them unchanged.
bool has_image_folders(const std::string& dir) {
  std::error_code ec;
  const bool train = fs::is_directory(fs::path(dir) / "train", ec), test = fs::is_directory(fs::path(dir) / "test", ec);
  if (train != test)
    throw Error(dir + ": has " + (train ? "train/ but no test/" : "test/ but no train/") +
                "; image folders need both, each with one subfolder per class (train/cat/001.png, test/cat/001.png)");
  return train;
}


Raw image_folders(const std::string& dataset, const std::string& dir) {
  const bool grey = dataset == "mnist";
  const Shape sample = model_sample(dataset);
  const int c = grey ? 1 : 3, side = int(sample[sample.size() - 1]);
  if (!data::image_folders_supported())
    throw Error(dir + ": holds train/ and test/ image folders, but loupe was built without stb_image, so it "
                "cannot read them; install libstb-dev (apt-get install libstb-dev) and rebuild");
  // Class checks first, from the folder names alone: a mismatch should not wait for every image to decode.
  const std::string train_dir = (fs::path(dir) / "train").string(), test_dir = (fs::path(dir) / "test").string();
  const std::vector<std::string> classes = data::image_folder_classes(train_dir);
  if (classes != data::image_folder_classes(test_dir))
    throw Error(dir + ": train/ and test/ must hold the same class subfolders (their sorted names are the labels); "
                "train/ has " + join(classes, ", ") + "; test/ has " + join(data::image_folder_classes(test_dir), ", "));
  if (classes.size() > 10)
    throw Error(train_dir + ": " + std::to_string(classes.size()) + " classes, but the reference models have "
                "10 outputs, so an image folder may hold at most 10 classes");
  data::ImageFolderData tr = data::load_image_folder(train_dir, c, side, side);
  data::ImageFolderData te = data::load_image_folder(test_dir, c, side, side);
  Raw r{"image folder", dir, sample, tr.n, te.n, std::move(tr.images),
        std::move(tr.labels), std::move(te.images), std::move(te.labels), ""};
  r.note = "; " + std::to_string(classes.size()) + " classes (" + join(classes, ", ") + "), read as " +
           (grey ? "grey " : "RGB ") + std::to_string(side) + "x" + std::to_string(side);
  if (tr.resized + te.resized > 0) r.note += ", " + std::to_string(tr.resized + te.resized) + " images resized";
  return r;
}

// --data DIR holding x_train.npy, y_train.npy, x_test.npy and y_test.npy (data/npy.h): the
// arrays as Keras's datasets give them, in place of the recipe's data set.
Raw numpy_arrays(const std::string& dataset, const std::string& dir, double val_split) {
  const Shape sample = model_sample(dataset);
  data::NpyImages a = data::load_npy_images(dir, std::vector<int64_t>(sample.begin(), sample.end()), 10, val_split);
  Raw r{"NumPy arrays", dir, sample, a.n_train, a.n_test, std::move(a.train_images),
        std::move(a.train_labels), std::move(a.test_images), std::move(a.test_labels), ""};
  r.note = "; images " + a.layout + ", uint8";
  if (a.split) r.note += "; the test set is x_train's last " + std::to_string(a.n_test) + " (--val-split)";
  return r;
}

Shape with_batch(int64_t n, const Shape& sample) {
  Shape s{n};
  for (int64_t d : sample) s.push_back(d);
  return s;
}

std::vector<int32_t> labels_as_ids(const std::vector<uint8_t>& v) { return std::vector<int32_t>(v.begin(), v.end()); }

// Sequences for the text models: x int32 [n, len], labels int32, and the loader's or the resident copy.
Data sequences(std::vector<int32_t> train_x, std::vector<int32_t> train_y, std::vector<int32_t> test_x,
               std::vector<int32_t> test_y, int64_t len, bool resident, Device dev) {
  Data d;
  int64_t n_train = int64_t(train_y.size()), n_test = int64_t(test_y.size());
  d.test = train::TensorDataset{from_vector(test_x, Shape{n_test, len}), from_vector(test_y, Shape{n_test}), 1.0}.to(dev);
  if (resident)
    d.train = train::TensorDataset{from_vector(train_x, Shape{n_train, len}), from_vector(train_y, Shape{n_train}), 1.0}
                  .to(dev);
  else
    d.host = std::make_shared<data::SequenceDataset>(std::move(train_x), std::move(train_y), int(len));
  return d;
}

// imdb_bilstm (maxlen 100) and imdb_fasttext (maxlen 400 with bigrams): the 20,000 most frequent words.
Data imdb(const DataRequest& req, Device dev) {
  const bool bigrams = req.dataset == "imdb_bigrams";
  const int maxlen = bigrams ? 400 : 100;
  const int num_words = 20000;
  if (req.synthetic) {
    // Benchmarks: fastText's vocabulary grows with the training bigrams (about 1.2 million ids on
    // the real data); the synthetic set draws from that many.
    int64_t vocab = bigrams ? 1200000 : num_words;
    data::SyntheticSequences s = data::synthetic_sequences(req.synthetic_kind, 25000, 25000, maxlen, vocab);
    Data d = sequences(std::move(s.train_x), labels_as_ids(s.train_y), std::move(s.test_x), labels_as_ids(s.test_y), maxlen,
                       req.resident, dev);
    d.vocab = vocab;
    d.description = std::string("synthetic ") + (req.synthetic_kind == data::SyntheticKind::Learnable ? "learnable " : "") +
                    "IMDb-shaped sequences (25000 train, 25000 test, maxlen " + std::to_string(maxlen) + ", " +
                    std::to_string(vocab) + " ids)";
    return d;
  }
  std::string dir = req.dir;
  if (dir.empty()) {
    auto found = data::find_default_imdb_dir();
    if (!found)
      throw Error(data::imdb_not_found());
    dir = *found;
  }
  data::ImdbSequences s = data::make_imdb_sequences(data::load_aclimdb(dir), num_words, maxlen, bigrams);
  Data d = sequences(std::move(s.train_x), labels_as_ids(s.train_y), std::move(s.test_x), labels_as_ids(s.test_y), maxlen,
                     req.resident, dev);
  d.vocab = s.vocab_size;
  d.words = s.vocab_fingerprint;
  d.description = "IMDb from " + dir + ": " + s.description;
  return d;
}

// char_lstm: windows of 40 characters (step 3) predicting the next; the last 5% of the windows are
// held out as the test set (next-character accuracy).
Data chars(const DataRequest& req, Device dev) {
  std::string path = req.dir, what;
  std::shared_ptr<data::CharCorpus> corpus;
  if (req.synthetic) {
    std::string text(600000, ' ');
    for (size_t i = 0; i < text.size(); ++i) text[i] = char(33 + philox(7, uint64_t(i), 41).v[0] % 57);  // 57 characters, as the Nietzsche text
    corpus = std::make_shared<data::CharCorpus>(data::CharCorpus::from_text(text));
    what = "synthetic random text (600,000 characters)";
  } else {
    if (path.empty()) {
      auto found = data::find_default_nietzsche_path();
      path = found ? *found : "/usr/share/common-licenses/GPL-3";
    }
    corpus = std::make_shared<data::CharCorpus>(data::CharCorpus::from_file(path));
    what = path;
  }
  if (corpus->vocab_size() > models::kCharLstmMaxChars)
    throw Error(what + ": " + std::to_string(corpus->vocab_size()) + " distinct characters; char_lstm's one-hot " +
                "input takes at most " + std::to_string(models::kCharLstmMaxChars) +
                " (each costs memory in every batch and weights in both layers): give a text in fewer scripts");
  const int window = 40, step = 3;
  int64_t n = corpus->num_windows(window, step);
  LOUPE_CHECK(n >= 20, what, ": too short for windows of ", window, " characters");
  int64_t n_test = std::max<int64_t>(1, n / 20), n_train = n - n_test;
  std::vector<int32_t> x(static_cast<size_t>(n * window)), y(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    std::vector<int32_t> w = corpus->window(k, window, step);
    std::copy(w.begin(), w.end(), x.begin() + k * window);
    y[size_t(k)] = corpus->target(k, window, step);
  }
  std::vector<int32_t> test_x(x.begin() + n_train * window, x.end()), test_y(y.begin() + n_train, y.end());
  x.resize(size_t(n_train * window));
  y.resize(size_t(n_train));
  Data d = sequences(std::move(x), std::move(y), std::move(test_x), std::move(test_y), window, req.resident, dev);
  d.vocab = corpus->vocab_size();
  d.corpus = corpus;
  for (char32_t c : corpus->chars()) data::append_utf8(c, &d.chars);
  d.description = what + ": " + std::to_string(corpus->length()) + " characters, " + std::to_string(d.vocab) +
                  " distinct; windows of 40, step 3 (" + std::to_string(n_train) + " train, " +
                  std::to_string(n_test) + " held out)";
  return d;
}

// --synthetic for a model file's own data (loupe bench): random arrays of its input's shape, ids
// below its vocabulary for an Embedding, labels below its classes or a regression's targets in
// [-1, 1). At most 2^26 input values (256 MiB) but at least 1,024 samples, so that any model file
// can be timed; random values, so only the speed means anything (the data line says so).
Data synthetic_arrays(const DataRequest& req, const Shape& sample, Device dev) {
  const int64_t per = std::max<int64_t>(1, sample.numel());
  const int64_t n_train = std::clamp<int64_t>((int64_t(1) << 26) / per, 1024, 16384), n_test = n_train / 8;
  const int64_t outputs = std::max<int64_t>(1, req.outputs), vocab = std::max<int64_t>(2, req.vocab);
  auto set = [&](int64_t n, uint64_t stream) {
    std::vector<float> x(size_t(n * per));
    for (size_t i = 0; i < x.size(); ++i) {
      const uint32_t r = philox(11, i, stream).v[0];
      x[i] = req.token_ids ? float(r % uint32_t(vocab)) : float(r >> 8) / float(1 << 24);
    }
    Tensor y;
    if (req.classes == 0) {  // a regression
      std::vector<float> t(size_t(n * outputs));
      for (size_t i = 0; i < t.size(); ++i) t[i] = float(philox(12, i, stream).v[0] >> 8) / float(1 << 23) - 1;
      y = from_vector(t, Shape{n, outputs});
    } else {
      std::vector<uint8_t> l(static_cast<size_t>(n));
      for (size_t i = 0; i < l.size(); ++i) l[i] = uint8_t(philox(13, i, stream).v[0] % uint32_t(req.classes));
      y = from_vector(l, Shape{n});
    }
    return train::TensorDataset{from_vector(x, with_batch(n, sample)), y, 1.0}.to(dev);
  };
  Data d;
  d.train = set(n_train, 1);
  d.test = set(n_test, 2);
  d.description = "synthetic arrays of the model's input [N, " + sample.str().substr(1) + " (" +
                  std::to_string(n_train) + " train, " + std::to_string(n_test) + " test; random " +
                  (req.token_ids ? "ids below " + std::to_string(vocab) : std::string("values")) + ", " +
                  (req.classes == 0 ? "targets" : "labels") + ": only the speed means anything)";
  return d;
}

// A model file's own data: NumPy arrays of its input's shape (data/npy.h's load_npy_features).
Data model_arrays(const DataRequest& req, Device dev) {
  // A time length the model file leaves None (-1) is the arrays' own; synthetic data's is 100.
  constexpr int64_t kSyntheticLength = 100;
  Shape sample;
  std::string dims;
  for (int64_t d : req.input_shape) {
    sample.push_back(d < 0 ? kSyntheticLength : d);
    dims += ", " + (d < 0 ? std::string("None") : std::to_string(d));
  }
  const std::string shape = "[N" + dims + "]";  // [N, 28, 28, 1]
  if (req.synthetic) return synthetic_arrays(req, sample, dev);
  if (req.dir.empty() || !data::has_npy_arrays(req.dir))
    throw Error("this model's input [" + dims.substr(2) + "] with " +
                std::to_string(req.classes) + " classes is none of the reference data sets' (MNIST's [28, 28], "
                "[28, 28, 1] or [784] with 10; CIFAR-10's [32, 32, 3] or [3072] with 10; IMDb's [100] ids over "
                "20,000 words with 1 output): give its data as --data DIR with x_train.npy " + shape +
                ", y_train.npy, x_test.npy and y_test.npy (or --val-split F without the test pair)");
  const bool regression = req.classes == 0;
  data::NpyFeatures a = data::load_npy_features(req.dir, req.input_shape, int(req.classes), req.token_ids, req.val_split,
                                                req.outputs, req.token_ids ? req.vocab : 0);
  sample = Shape(a.sample);
  const std::string read = "[N, " + sample.str().substr(1);  // a time length of None as the arrays have it
  Data d;
  // A regression's targets [N, outputs] as float32; a classifier's labels [N] as uint8.
  auto y = [&](bool train) {
    const int64_t n = train ? a.n_train : a.n_test;
    return regression ? from_vector(train ? a.train_targets : a.test_targets, Shape{n, req.outputs})
                      : from_vector(train ? a.train_labels : a.test_labels, Shape{n});
  };
  d.test = train::TensorDataset{from_vector(a.test_x, with_batch(a.n_test, sample)), y(false), 1.0}.to(dev);
  d.description = "NumPy arrays from " + req.dir + " (" + std::to_string(a.n_train) + " train, " +
                  std::to_string(a.n_test) + (a.split ? " held out by --val-split" : " test") + "; x " + a.x_type +
                  " " + read + (a.x_type == "uint8" && !req.token_ids ? " scaled by 1/255" : "") +
                  (regression ? "; float targets [N, " + std::to_string(req.outputs) + "]" : std::string()) + ")";
  // The loader's batches carry class labels only: a regression's training set stays on the device.
  if (regression && !req.resident) d.description += "; resident, since the loader carries class labels, not targets";
  if (req.resident || regression)
    d.train = train::TensorDataset{from_vector(a.train_x, with_batch(a.n_train, sample)), y(true), 1.0}.to(dev);
  else
    d.host = std::make_shared<loader::FloatArrayDataset>(std::move(a.train_x), std::move(a.train_labels), sample);
  return d;
}

}  // namespace

DataRequest request_for(const models::ModelInfo& info) {
  if (!info.loss_missing.empty()) throw Error(info.loss_missing);
  DataRequest r;
  r.dataset = info.recipe.dataset;
  r.input_shape = info.input_shape;
  r.classes = info.classes;
  r.outputs = info.outputs;
  r.token_ids = info.token_ids;
  r.vocab = info.vocab;
  return r;
}

Data load_data(const DataRequest& req, Device dev) {
  const bool known = req.dataset == "mnist" || req.dataset == "cifar10";
  // IMDb's shape of model (ids over 20,000 words, one output) given NumPy arrays reads them as its
  // own data: the Keras examples' imdb.load_data after pad_sequences.
  const bool own = req.dataset == "arrays" || req.dataset == "imdb";
  const bool arrays = (known || own) && !req.synthetic && !req.dir.empty() && data::has_npy_arrays(req.dir);
  if (req.val_split > 0 && !arrays)
    throw Error("--val-split holds out part of NumPy arrays that have no test set (--data DIR with x_train.npy and "
                "y_train.npy); this run's data has its own test set");
  if (req.dataset == "arrays" || (own && arrays)) return model_arrays(req, dev);
  if (req.dataset == "imdb" || req.dataset == "imdb_bigrams") return imdb(req, dev);
  if (req.dataset == "chars") return chars(req, dev);
  Raw r;
  if (arrays)
    r = numpy_arrays(req.dataset, req.dir, req.val_split);
  else if (known && !req.synthetic && !req.dir.empty() && has_image_folders(req.dir))
    r = image_folders(req.dataset, req.dir);
  else if (req.dataset == "mnist")
    r = req.synthetic ? synthetic("MNIST", req.synthetic_kind, Shape{28, 28}, 60000, 10000) : mnist(req.dir);
  else if (req.dataset == "cifar10")
    r = req.synthetic ? synthetic("CIFAR-10", req.synthetic_kind, Shape{3, 32, 32}, 50000, 10000) : cifar10(req.dir);
  else throw Error("unknown data set '" + req.dataset + "' in the model's recipe");
  Data d;
  d.test = train::TensorDataset{from_vector(r.test_images, with_batch(r.n_test, r.sample)),
                                from_vector(r.test_labels, Shape{r.n_test})}.to(dev);
  d.description = r.name + " from " + r.dir + " (" + std::to_string(r.n_train) + " train, " +
                  std::to_string(r.n_test) + " test)" + r.note;
  if (req.resident) {
    d.train = train::TensorDataset{from_vector(r.train_images, with_batch(r.n_train, r.sample)),
                                   from_vector(r.train_labels, Shape{r.n_train})}.to(dev);
    if (req.augment) d.description += "; no augmentation with --resident";
  } else if (req.dataset == "cifar10") {
    d.host = std::make_shared<data::CifarDataset>(std::move(r.train_images), std::move(r.train_labels), req.augment);
    if (req.augment) d.description += "; augmentation (shift 0.1, horizontal flip) in the loader's workers";
  } else {
    d.host = std::make_shared<loader::ArrayDataset>(std::move(r.train_images), std::move(r.train_labels), r.sample);
  }
  return d;
}

std::vector<std::string> default_data_paths(const std::string& dataset) {
  std::vector<std::optional<std::string>> found;
  if (dataset.empty() || dataset == "mnist") found.push_back(data::find_default_mnist_dir());
  if (dataset.empty() || dataset == "cifar10") found.push_back(data::find_default_cifar10_dir());
  if (dataset == "imdb" || dataset == "imdb_bigrams") found.push_back(data::find_default_imdb_dir());
  if (dataset == "chars") {
    const std::optional<std::string> text = data::find_default_nietzsche_path();
    found.push_back(text ? *text : "/usr/share/common-licenses/GPL-3");
  }
  std::vector<std::string> paths;
  for (const auto& f : found)
    if (f) paths.push_back(*f);
  return paths;
}

}  // namespace loupe::run
