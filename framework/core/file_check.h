// Paths the user names, checked for what they are before anything opens them: a FIFO blocks the
// open or the read forever, a device node reads without end (/dev/zero: 7.8 GB before bad_alloc)
// and a checkpoint written "onto" one replaced it with a regular file (as root, --save /dev/null
// would have replaced the system's /dev/null). Inputs must be regular files; outputs regular
// files or new ones. Symbolic links are followed. And an input's size, checked against what its
// reader takes before it is read (read_capped): a review of 200 MB took 4.5 GB.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace loupe {

// What the path is when it is not a regular file ("a directory", "a FIFO (named pipe)", "a
// character device", "a block device", "a socket", "a loop of symbolic links"); "" for a regular
// file, and for a path that does not exist ("missing" is for the caller to word).
std::string what_else(const std::string& path);

// Why `path` cannot be read as a data set's folder, worded after its name: "" when it is a
// directory; else "<what> not found", or, for something that is there, what it is instead ("is a
// loop of symbolic links, not a directory", "is a regular file, not a directory", ...).
std::string directory_problem(const std::string& path, const std::string& what);

// Throws one sentence when `path` exists and is not a regular file: an output may be new or a
// regular file it replaces or extends, never a device, a FIFO or a directory.
void require_regular_output(const std::string& path, const std::string& what);

// The directory part of `path`: "." for a bare name, "/" for a file at the root.
std::string parent_dir(const std::string& path);

// 0 when the directory `dir` takes a new file, else the errno that refused it: an unnamed
// O_TMPFILE file is made there (nothing is left even if the process dies), or where the filesystem
// has none, `fallback` (a path in dir, created exclusively) is made and removed.
int probe_new_file(const std::string& dir, const std::string& fallback);

// Throws one sentence, before any work, when the output file `path` of `option` ("--trace") cannot
// be written: "--trace: cannot write '/x/t.json': its directory does not exist". Refused: a missing
// directory or one that is not a directory, a path that is not a regular file (a FIFO, a device, a
// directory: require_regular_output's), a directory that takes no new file (probe_new_file), and an
// existing file that cannot be opened for writing. Nothing is created or changed.
void check_output_file(const std::string& path, const std::string& option);

// The same for an output directory that the writer creates when it is missing (--tensorboard DIR):
// an existing one must be a directory that takes a new file, a missing one must have a nearest
// existing ancestor that is a directory and takes one.
void check_output_directory(const std::string& dir, const std::string& option);

// What a run reads (`what` names it: "the --resume checkpoint"; `data`: a data set's folder or file,
// named "... folder" or "... file" by what it is) and what it writes (`option` names it; `folder`: a
// folder of new files, --tensorboard's). `spare` names the output that may be this input (--save
// continues the checkpoint it resumes).
struct InputPath {
  std::string what, path;
  bool data = false;
  std::string spare;
};
struct OutputPath {
  std::string option, path;
  bool folder = false;
};

// Throws one sentence when an output would write over an input (docs/cli.md, "Inputs and
// outputs"): compared by device and inode, so the same whether the output exists yet or not, and
// through symbolic links. In an input folder, no output is a file a data set's reader takes (NumPy
// arrays, IDX files, CIFAR-10's batches and meta, text), nor lies in a folder of it (image classes,
// IMDb's reviews), nor is a folder of new files.
void check_inputs_kept(const std::vector<OutputPath>& outputs, const std::vector<InputPath>& inputs);

// Reads the regular file `path` whole, unless it holds more than `cap` bytes. Its size is read
// (fstat) before anything is allocated, so a file over the cap costs nothing; and no more than
// cap + 1 bytes are read, so a file that grows meanwhile, or that reports no size (as /proc's do),
// is caught as well. Returns true with the bytes in `out`; false, with `out` empty and `*size` the
// size found (more than `cap`; for a file that said less, what was read before stopping), for a
// file over the cap: the caller words that refusal, with its cap and the reason for it. Throws
// "<path>: cannot open: <why>" or "<path>: read error: <why>". Check what_else() first: opening a
// FIFO blocks.
bool read_capped(const std::string& path, uint64_t cap, std::string* out, uint64_t* size);
bool read_capped(const std::string& path, uint64_t cap, std::vector<uint8_t>* out, uint64_t* size);

// Throws "<file>: <why>": a reader's refusal names the file first (a data set has several of
// similar names, a model file is one of many).
[[noreturn]] void refuse_file(const std::string& file, const std::string& why);

// Writes `text` as the whole of the file `path` (created or replaced); a failure, at the open, the
// write or the flush (a full disk shows there), throws "cannot write 'PATH': <why>".
void write_whole_file(const std::string& path, const std::string& text);

// The big-endian 32-bit word at p, as file formats store theirs (IDX, PNG).
inline uint32_t be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

// Sizes in the readers' messages: 2147483648 -> "2,147,483,648".
std::string with_commas(uint64_t v);

// A size as people read one, in the decimal units of `ls --si`: "512 bytes", "14 KB", "2.1 MB".
std::string short_size(uint64_t bytes);

}  // namespace loupe
