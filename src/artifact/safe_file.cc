// See safe_file.h: the checks before a file is replaced, the temporary file
// and the rename.
#include "safe_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

namespace tessera::safe_file {
namespace {

[[noreturn]] void fail(const std::string& shown, const std::string& why) {
  throw WriteError("cannot write '" + shown + "': " + why);
}

/// Fails with the current errno's text after `prefix`; errno is read first, before any allocation.
[[noreturn]] void fail_errno(const std::string& shown, const char* prefix = "") {
  const int error = errno;
  fail(shown, std::string(prefix) + std::strerror(error));
}

const char* kind_of(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

/// Throws unless `name` is absent or a regular file (links are not followed).
void check_replaceable(int dir_fd, const std::string& name, const std::string& shown) {
  struct stat info {};
  if (::fstatat(dir_fd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0) {
    if (!S_ISREG(info.st_mode)) {
      fail(shown, std::string("it exists and is ") + kind_of(info.st_mode) + "; only a regular file is replaced");
    }
  } else if (errno != ENOENT) {
    fail_errno(shown);
  }
}

/// 16 hex digits nobody can predict, so no link can be planted at the temporary name in advance.
std::string unpredictable_suffix() {
  thread_local std::mt19937_64 generator = [] {
    std::random_device device;
    std::seed_seq seed{device(), device(), device(), static_cast<unsigned>(::getpid()),
                       static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count())};
    return std::mt19937_64(seed);
  }();
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(generator()));
  return text;
}

void write_all(int fd, const void* data, size_t size, const std::string& shown) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, bytes, std::min<size_t>(size, size_t{1} << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_errno(shown);
    if (n == 0) fail(shown, "short write");
    bytes += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

void replace_file_at(int dir_fd, const std::string& name, const std::string& shown,
                     const std::function<void(const Sink&)>& produce) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    fail(shown, "not a file name");
  }
  check_replaceable(dir_fd, name, shown);
  // Beside the target (a rename cannot cross file systems), hidden, and short
  // enough for NAME_MAX whatever the target's length.
  std::string temporary;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    temporary.assign(1, '.');  // appended piece by piece: GCC 12's -Wrestrict misfires on "." + ...
    temporary.append(name, 0, 200).append(".tmp-").append(unpredictable_suffix());
    fd = ::openat(dir_fd, temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && (errno != EEXIST || attempt == 16)) fail_errno(shown, "cannot create a temporary file beside it: ");
  }
  try {
    produce([&](const void* data, size_t size) { write_all(fd, data, size, shown); });
    const int descriptor = fd;
    fd = -1;
    if (::close(descriptor) != 0) fail_errno(shown);
    check_replaceable(dir_fd, name, shown);  // again, just before the rename
    if (::renameat(dir_fd, temporary.c_str(), dir_fd, name.c_str()) != 0) fail_errno(shown);
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlinkat(dir_fd, temporary.c_str(), 0);
    throw;
  }
}

int open_directory(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    throw WriteError("cannot open directory '" + path + "': " + std::strerror(error));
  }
  return fd;
}

void replace_file(const std::string& path, const std::function<void(const Sink&)>& produce) {
  const std::filesystem::path p(path);
  const std::string name = p.filename().string();
  if (name.empty() || name == "." || name == "..") fail(path, "the path names a directory, not a file");
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) fail_errno(path, "cannot open its folder: ");
  try {
    replace_file_at(dir_fd, name, path, produce);
  } catch (...) {
    ::close(dir_fd);
    throw;
  }
  ::close(dir_fd);
}

}  // namespace tessera::safe_file
