// Where loupe looks for a data set when no --data is given: one search order for every reader
// (docs/design.md, "Knobs and paths").
//
// The places, in order, for a set stored under the relative path `rel` ("mnist", "cifar10",
// "nietzsche/nietzsche.txt"):
//   $LOUPE_DATA/rel          (LOUPE_DATA through core/knobs.h; left out when unset or empty)
//   $HOME/.cache/loupe/rel   (where data/fetch.sh puts it; left out when HOME is unset or empty)
//   data/rel                 (relative to the working directory)
// What makes a place usable is the reader's business (four IDX files, six CIFAR batches, the
// review folders, a non-empty file), and so are places beyond these (MNIST: Debian's package).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace loupe::data {

// The places above for `rel`, in order.
std::vector<std::string> search_places(const std::string& rel);

// The first of `places` that `usable` accepts; empty if none.
std::optional<std::string> first_usable(const std::vector<std::string>& places,
                                        const std::function<bool(const std::string&)>& usable);

// "A, B, C": the places, for an error message.
std::string list_places(const std::vector<std::string>& places);

// "WHAT was not found (looked in A, B, C).\nHOW": the error when no place is usable.
std::string not_found(const std::string& what, const std::vector<std::string>& places, const std::string& how);

// An open descriptor of the data file `path`, for the readers that open a file themselves (the
// .npy and .npz readers) rather than read it whole (core/file_check.h's read_capped): anything but
// a regular file is refused in one sentence before it is opened ("PATH is a FIFO (named pipe), not
// KIND; give a regular file"), since opening a FIFO blocks and a device reads without end; a loop
// of symbolic links is named as one. The open itself does not block (O_NONBLOCK, against a FIFO
// put there after the check) and what was opened is checked again. The caller closes it.
int open_data_file(const std::string& path, const std::string& kind);

}  // namespace loupe::data
