// data/paths.h: one search order for every data set ($LOUPE_DATA, ~/.cache/loupe, ./data), the
// readers' own differences on top of it, and the errors that list the places looked in
// (docs/design.md, "Knobs and paths"). And core/file_check.h's capped read, which every reader of a
// whole file uses (docs/fuzzing.md, "Size caps").
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/file_check.h"
#include "data/char_corpus.h"
#include "data/cifar.h"
#include "data/idx.h"
#include "data/imdb.h"
#include "data/paths.h"
#include "test_util.h"

namespace fs = std::filesystem;
using loupe::test::EnvVar;
using Places = std::vector<std::string>;

namespace {

using Unset = loupe::test::UnsetEnv;

TEST(Paths, SearchOrderIsLoupeDataThenCacheThenData) {
  EnvVar data("LOUPE_DATA", "/ld"), home("HOME", "/home/u");
  EXPECT_EQ(loupe::data::search_places("cifar10"), (Places{"/ld/cifar10", "/home/u/.cache/loupe/cifar10", "data/cifar10"}));
  EXPECT_EQ(loupe::data::search_places("nietzsche/nietzsche.txt"),
            (Places{"/ld/nietzsche/nietzsche.txt", "/home/u/.cache/loupe/nietzsche/nietzsche.txt",
                    "data/nietzsche/nietzsche.txt"}));
}

TEST(Paths, UnsetOrEmptyVariablesDropTheirPlace) {
  {
    Unset data("LOUPE_DATA");
    EnvVar home("HOME", "/h");
    EXPECT_EQ(loupe::data::search_places("imdb"), (Places{"/h/.cache/loupe/imdb", "data/imdb"}));
  }
  {
    EnvVar data("LOUPE_DATA", ""), home("HOME", "");
    EXPECT_EQ(loupe::data::search_places("imdb"), (Places{"data/imdb"}));
  }
  {
    EnvVar data("LOUPE_DATA", "rel");
    Unset home("HOME");
    EXPECT_EQ(loupe::data::search_places("imdb"), (Places{"rel/imdb", "data/imdb"}));
  }
}

TEST(Paths, FirstUsableTakesTheFirstAcceptedPlace) {
  const Places p{"a", "b", "c"};
  EXPECT_EQ(loupe::data::first_usable(p, [](const std::string& s) { return s != "a"; }), "b");
  EXPECT_EQ(loupe::data::first_usable(p, [](const std::string&) { return false; }), std::nullopt);
  EXPECT_EQ(loupe::data::first_usable({}, [](const std::string&) { return true; }), std::nullopt);
}

TEST(Paths, NotFoundListsThePlaces) {
  EXPECT_EQ(loupe::data::not_found("X", {"/a/x", "data/x"}, "Fetch it."), "X was not found (looked in /a/x, data/x).\nFetch it.");
  EnvVar data("LOUPE_DATA", "/ld"), home("HOME", "/hm");
  const std::string cifar = loupe::data::cifar10_not_found();
  EXPECT_NE(cifar.find("CIFAR-10 was not found (looked in /ld/cifar10, /hm/.cache/loupe/cifar10, data/cifar10)"),
            std::string::npos) << cifar;
  EXPECT_NE(cifar.find("data/fetch.sh cifar10"), std::string::npos) << cifar;
  const std::string imdb = loupe::data::imdb_not_found();
  EXPECT_NE(imdb.find("IMDb (aclImdb) was not found (looked in /ld/imdb, /hm/.cache/loupe/imdb, data/imdb)"),
            std::string::npos) << imdb;
  EXPECT_NE(imdb.find("data/fetch.sh imdb"), std::string::npos) << imdb;
  const std::string mnist = loupe::data::how_to_get_data();
  EXPECT_NE(mnist.find("Without --data loupe looks in: /ld/mnist, /hm/.cache/loupe/mnist, data/mnist, /ld/fashion-mnist, "
                       "/hm/.cache/loupe/fashion-mnist, data/fashion-mnist, /usr/share/datasets/fashion-mnist\n"),
            std::string::npos) << mnist;
}

// Every reader searches the same places; MNIST searches them for MNIST proper and then for
// Fashion-MNIST, then Debian's package.
TEST(Paths, EveryReaderUsesTheSameOrder) {
  EnvVar data("LOUPE_DATA", "/ld"), home("HOME", "/hm");
  using loupe::data::search_places;
  EXPECT_EQ(loupe::data::default_cifar10_dirs(), search_places("cifar10"));
  EXPECT_EQ(loupe::data::default_imdb_dirs(), search_places("imdb"));
  EXPECT_EQ(loupe::data::default_nietzsche_paths(), search_places("nietzsche/nietzsche.txt"));
  Places mnist = search_places("mnist");
  for (const std::string& p : search_places("fashion-mnist")) mnist.push_back(p);
  mnist.push_back("/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(loupe::data::default_mnist_dirs(), mnist);
}

// What each reader takes as a usable place: CIFAR-10's six batch files in the place or in its
// cifar-10-batches-bin/; the first usable place wins over a later one.
TEST(Paths, CifarTakesTheFirstCompletePlace) {
  const fs::path root = fs::temp_directory_path() / ("loupe_test_paths_" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto batches = [](const fs::path& d) {
    fs::create_directories(d);
    for (const char* f : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                          "data_batch_5.bin", "test_batch.bin"})
      std::ofstream(d / f) << "x";
  };
  EnvVar data("LOUPE_DATA", (root / "ld").string()), home("HOME", (root / "home").string());
  EXPECT_EQ(loupe::data::find_default_cifar10_dir(), std::nullopt);  // (unless ./data/cifar10 exists)
  batches(root / "home/.cache/loupe/cifar10/cifar-10-batches-bin");
  EXPECT_EQ(loupe::data::find_default_cifar10_dir(), (root / "home/.cache/loupe/cifar10").string());
  batches(root / "ld/cifar10");
  fs::remove(root / "ld/cifar10/test_batch.bin");  // incomplete: skipped
  EXPECT_EQ(loupe::data::find_default_cifar10_dir(), (root / "home/.cache/loupe/cifar10").string());
  std::ofstream(root / "ld/cifar10/test_batch.bin") << "x";
  EXPECT_EQ(loupe::data::find_default_cifar10_dir(), (root / "ld/cifar10").string());
  fs::remove_all(root);
}

// A file is read only when its size is within the cap, and never past cap + 1 bytes, even where
// the size it reports is wrong: /proc's files report 0.
TEST(FileCheck, ReadCappedStopsAtTheCapWhateverTheFileSays) {
  const fs::path p = loupe::test::temp_path("capped.txt");
  std::ofstream(p) << "0123456789";
  std::string s;
  uint64_t size = 0;
  EXPECT_TRUE(loupe::read_capped(p.string(), 10, &s, &size));
  EXPECT_EQ(s, "0123456789");
  EXPECT_EQ(size, 10u);
  EXPECT_FALSE(loupe::read_capped(p.string(), 9, &s, &size));
  EXPECT_EQ(size, 10u);
  EXPECT_TRUE(s.empty());
  std::vector<uint8_t> b;
  std::ofstream(p, std::ios::trunc).flush();
  EXPECT_TRUE(loupe::read_capped(p.string(), 0, &b, &size));
  EXPECT_TRUE(b.empty());
  fs::remove(p);

  const std::string status = loupe::test::slurp("/proc/self/status");
  ASSERT_GT(status.size(), 100u);
  EXPECT_EQ(fs::file_size("/proc/self/status"), 0u);
  EXPECT_FALSE(loupe::read_capped("/proc/self/status", 64, &s, &size));
  EXPECT_EQ(size, 65u);
  EXPECT_TRUE(loupe::read_capped("/proc/self/status", 1 << 20, &s, &size));
  EXPECT_EQ(s.substr(0, 5), "Name:");
  EXPECT_EQ(size, s.size());
  try {
    loupe::read_capped(loupe::test::temp_path("absent").string(), 10, &s, &size);
    ADD_FAILURE() << "no error for a missing file";
  } catch (const loupe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("absent: cannot open: No such file or directory"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(loupe::with_commas(2147483648u), "2,147,483,648");
  EXPECT_EQ(loupe::with_commas(999), "999");
  EXPECT_EQ(loupe::short_size(512), "512 bytes");
  EXPECT_EQ(loupe::short_size(14000), "14 KB");
  EXPECT_EQ(loupe::short_size(2121767), "2.1 MB");
  EXPECT_EQ(loupe::short_size(26421856), "26 MB");
  EXPECT_EQ(loupe::short_size(999999), "1.0 MB");
}

}  // namespace

// A data set's folder that is not one is named for what it is: missing, a loop of symbolic links
// (which stat() reports as ELOOP, and the readers once called "not found"), a file, a FIFO.
TEST(FileCheck, DirectoryProblemSaysWhatThePathIs) {
  const fs::path root = loupe::test::temp_path("dirs");
  fs::remove_all(root);
  fs::create_directories(root / "d");
  std::ofstream(root / "f") << "x";
  fs::create_symlink(root / "b", root / "a");
  fs::create_symlink(root / "a", root / "b");
  ASSERT_EQ(mkfifo((root / "p").c_str(), 0600), 0);
  EXPECT_EQ(loupe::directory_problem((root / "d").string(), "data directory"), "");
  EXPECT_EQ(loupe::directory_problem((root / "none").string(), "data directory"), "data directory not found");
  EXPECT_EQ(loupe::directory_problem((root / "a").string(), "x"), "is a loop of symbolic links, not a directory");
  EXPECT_EQ(loupe::directory_problem((root / "f").string(), "x"), "is a regular file, not a directory");
  EXPECT_EQ(loupe::directory_problem((root / "p").string(), "x"), "is a FIFO (named pipe), not a directory");
  fs::remove_all(root);
}

// The readers that open a data file themselves (.npy, .npz) open it only when it is a regular
// file: a FIFO, a directory, a device or a loop of symbolic links is named, in one sentence,
// before any open (opening a FIFO blocks until a writer comes: run in a child that an alarm ends,
// so that a reader that opens it fails the test instead of hanging it). A regular file opens, and
// its descriptor reads without O_NONBLOCK.
TEST(DataFile, OnlyARegularFileIsOpened) {
  const fs::path root = loupe::test::temp_path("data_files");
  fs::remove_all(root);
  fs::create_directories(root / "d");
  std::ofstream(root / "f.npy") << "xyz";
  fs::create_symlink(root / "b.npy", root / "a.npy");
  fs::create_symlink(root / "a.npy", root / "b.npy");
  ASSERT_EQ(mkfifo((root / "p.npy").c_str(), 0600), 0);
  auto refusal = [&](const fs::path& p) {
    return loupe::test::run_with_memory_limit([&] {
      alarm(5);
      ::close(loupe::data::open_data_file(p.string(), "a .npy file"));
    });
  };
  const std::string tail = ", not a .npy file; give a regular file";
  EXPECT_EQ(refusal(root / "p.npy"), "error: " + (root / "p.npy").string() + " is a FIFO (named pipe)" + tail);
  EXPECT_EQ(refusal(root / "d"), "error: " + (root / "d").string() + " is a directory" + tail);
  EXPECT_EQ(refusal("/dev/zero"), "error: /dev/zero is a character device" + tail);
  EXPECT_EQ(refusal(root / "a.npy"), "error: " + (root / "a.npy").string() + " is a loop of symbolic links" + tail);
  EXPECT_EQ(refusal(root / "none.npy"), "error: cannot read '" + (root / "none.npy").string() +
                                            "': No such file or directory");
  const int fd = loupe::data::open_data_file((root / "f.npy").string(), "a .npy file");
  ASSERT_GE(fd, 0);
  EXPECT_EQ(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
  char b[4] = {};
  EXPECT_EQ(read(fd, b, sizeof b), 3);
  EXPECT_EQ(std::string(b), "xyz");
  close(fd);
  fs::remove_all(root);
}
