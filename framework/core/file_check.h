// Paths the user names, checked for what they are before anything opens them: a FIFO blocks the
// open or the read forever, a device node reads without end (/dev/zero: 7.8 GB before bad_alloc)
// and a checkpoint written "onto" one replaced it with a regular file (as root, --save /dev/null
// would have replaced the system's /dev/null). Inputs must be regular files; outputs regular
// files or new ones. Symbolic links are followed.
#pragma once
#include <string>

namespace loupe {

// What the path is when it is not a regular file ("a directory", "a FIFO (named pipe)", "a
// character device", "a block device", "a socket", "a loop of symbolic links"); "" for a regular
// file, and for a path that does not exist ("missing" is for the caller to word).
std::string what_else(const std::string& path);

// Throws one sentence when `path` exists and is not a regular file: an output may be new or a
// regular file it replaces or extends, never a device, a FIFO or a directory.
void require_regular_output(const std::string& path, const std::string& what);

}  // namespace loupe
