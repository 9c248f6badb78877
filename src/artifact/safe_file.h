// Writing files without surprises: the one way Tessera and its CLI write a
// file (.tsr artifacts, reports, .npy outputs). The target is replaced
// atomically through a temporary file created beside it with O_EXCL and
// O_NOFOLLOW under an unpredictable name, and only a regular file is ever
// replaced: a symbolic link, directory, FIFO, device or socket at the target
// is an error, so a write never goes through a planted link and never turns a
// device node such as /dev/null into a regular file.
//
// Depends on POSIX and the standard library only, so that the CLI (which is
// otherwise built on the C API alone) compiles this file too.
#pragma once
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>

namespace tessera::safe_file {

/// Why a file could not be written; what() names the file.
class WriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Takes the next bytes of the file. Throws WriteError when they cannot be written.
using Sink = std::function<void(const void* data, size_t size)>;

/// Replaces the file `name` (one path component: no '/', not "." or "..") in
/// the directory open as `dir_fd` with what `produce` passes to its sink.
/// `name` then holds either its old content or the whole new one. `shown` is
/// the path used in messages. Throws WriteError; an exception from `produce`
/// propagates after the temporary file is removed. A process that can write
/// to the directory can still race the check with the rename, but such a
/// process could replace the file itself anyway.
void replace_file_at(int dir_fd, const std::string& name, const std::string& shown,
                     const std::function<void(const Sink&)>& produce);

/// Same for a path: its directory part, which the caller named, is opened
/// following links; its last component is handled as above.
void replace_file(const std::string& path, const std::function<void(const Sink&)>& produce);

/// Opens a directory for replace_file_at (following links, O_CLOEXEC); the
/// caller closes it. Throws WriteError.
int open_directory(const std::string& path);

}  // namespace tessera::safe_file
