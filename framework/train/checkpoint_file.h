// The checkpoint file format: named byte records plus key/value metadata, versioned and
// checksummed. It knows nothing about tensors; the trainer converts tensors to and from records.
//
// Layout (all integers little-endian; str = u32 length + bytes):
//   "LOUPECKP"  u32 version
//   str model
//   u32 n_meta    { str key, str value } * n_meta
//   u32 n_records { str name, i32 dtype, u32 ndim, i64 dim * ndim, u64 n_bytes, bytes } * n_records
//   u32 crc32 (zlib) of every byte above, then "LOUPEEND"
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace loupe {

constexpr uint32_t kCheckpointVersion = 1;

struct CheckpointRecord {
  std::string name;            // e.g. "model/fc1.weight", "optim/rms.v"
  int32_t dtype = 0;           // opaque code chosen by the caller
  std::vector<int64_t> shape;  // empty for a scalar
  std::vector<uint8_t> bytes;  // raw little-endian data
};

struct CheckpointFile {
  std::string model;                                      // model name, e.g. "mnist_mlp"
  std::vector<std::pair<std::string, std::string>> meta;  // optimizer, epoch, seed, rng offset ...
  std::vector<CheckpointRecord> records;

  const CheckpointRecord* find(const std::string& name) const;  // nullptr if absent
  std::string meta_value(const std::string& key, const std::string& fallback = "") const;
};

// Writes into an unnamed file beside path (O_TMPFILE; a named "<path>.tmp.<pid>" where the
// filesystem has none), fsyncs, names it "<path>.tmp.<pid>" and renames it into place, so a crash
// never leaves a half-written checkpoint under the real name, and a process killed while writing
// leaves no file at all. Temporary files of processes that no longer exist are removed first.
// Throws loupe::Error if the directory does not exist, a record name repeats, or the disk write
// fails.
void write_checkpoint_file(const std::string& path, const CheckpointFile& ckpt);

// Throws the error write_checkpoint_file would, before any work: the directory is missing, the
// path is a directory, or the directory refuses a file (its temporary file is created and removed).
void check_checkpoint_destination(const std::string& path);

// A run's claim on its --save path for as long as it lives: an exclusive flock on PATH.lock beside
// it, holding the owner's pid, so a second run saving to the same path fails at its start instead
// of the two overwriting each other's epochs (the last writer won, silently). The kernel drops the
// lock when the process ends, killed too; the small file stays, harmless, for the next run to lock.
class CheckpointLock {
 public:
  explicit CheckpointLock(const std::string& path);  // throws one sentence when another run holds it
  ~CheckpointLock();
  CheckpointLock(const CheckpointLock&) = delete;
  CheckpointLock& operator=(const CheckpointLock&) = delete;

 private:
  int fd_ = -1;
};

// Throws loupe::Error naming the file if it is missing, not a loupe checkpoint, from a newer
// format version, truncated or corrupt. Never trusts a length it has not checked.
CheckpointFile read_checkpoint_file(const std::string& path);

}  // namespace loupe
