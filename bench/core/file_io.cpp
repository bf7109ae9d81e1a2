#include "bench/core/file_io.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "bench/core/errors.hpp"

namespace cclbench {
namespace {

std::string system_reason() { return std::strerror(errno); }

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw FatalError(ExitCode::runtime_error, "cannot " + what + " '" + path + "': " + system_reason());
}

std::string parent_directory(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void write_all(int fd, std::string_view content, const std::string& path) {
  const char* data = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    const ssize_t written = ::write(fd, data, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      fail("write", path);
    }
    data += written;
    left -= static_cast<std::size_t>(written);
  }
}

bool is_symlink(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0 && S_ISLNK(info.st_mode);
}

bool exists_not_regular(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode);
}

// Temporary files are named "<name>.tmp.<host>.<pid>" beside the target, so that a writer can tell
// its own host's leftovers of dead processes (a rank killed between creating and renaming one)
// from the files of live writers, including writers on other hosts of a shared filesystem.
std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "host";
  // The name becomes part of a file name: keep it to characters that are safe there.
  std::string safe(name);
  for (char& c : safe) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    if (!plain) c = '_';
  }
  return safe;
}

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Removes "<name>.tmp.<this host>.<pid>" files of processes that no longer exist on this host.
// Best effort: a leftover that cannot be removed is harmless (readers never open temporaries).
void remove_dead_writers_temporaries(const std::string& path, const std::string& prefix) {
  DIR* directory = ::opendir(parent_directory(path).c_str());
  if (directory == nullptr) return;
  const int directory_fd = ::dirfd(directory);
  while (const dirent* entry = ::readdir(directory)) {
    const std::string name = entry->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge (EPERM)
    ::unlinkat(directory_fd, name.c_str(), 0);
  }
  ::closedir(directory);
}

// A file with no name yet (O_TMPFILE) in the directory of `path`, or -1 where the filesystem or
// kernel has no O_TMPFILE (the caller then uses a named temporary).
int open_unnamed(const std::string& path) {
#ifdef O_TMPFILE
  const int fd = ::open(parent_directory(path).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (fd >= 0) return fd;
  if (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL) return -1;
  fail("create a temporary file for", path);
#else
  (void)path;
  return -1;
#endif
}

// Gives the unnamed file `fd` the name `temporary` (through /proc/self/fd, which needs no
// privilege, unlike AT_EMPTY_PATH). False where /proc is not mounted.
bool name_unnamed(int fd, const std::string& temporary) {
  char proc_path[64];
  std::snprintf(proc_path, sizeof proc_path, "/proc/self/fd/%d", fd);
  if (::linkat(AT_FDCWD, proc_path, AT_FDCWD, temporary.c_str(), AT_SYMLINK_FOLLOW) == 0) return true;
  if (errno == ENOENT && ::access("/proc/self/fd", F_OK) != 0) return false;
  fail("name the temporary file", temporary);
}

void write_and_flush(int fd, std::string_view content, const std::string& name) {
  write_all(fd, content, name);
  if (::fchmod(fd, 0644) != 0) fail("set the mode of", name);
  if (::fsync(fd) != 0) fail("flush", name);
}

}  // namespace

void write_file_atomic(const std::string& path, std::string_view content) {
  if (is_symlink(path)) {
    throw FatalError(ExitCode::runtime_error, "refusing to write '" + path + "': it is a symbolic link");
  }
  // rename() would replace a device node or FIFO with a regular file: "-J /dev/null" run as root
  // must not turn /dev/null into a results file.
  if (exists_not_regular(path)) {
    throw FatalError(ExitCode::runtime_error, "refusing to write '" + path + "': it exists and is not a regular file");
  }
  const std::string prefix = base_name(path) + ".tmp." + host_name() + ".";
  remove_dead_writers_temporaries(path, prefix);
  const std::string temporary = path.substr(0, path.size() - base_name(path).size()) + prefix + std::to_string(::getpid());
  // A name of this process is never in use by a live writer: it is a leftover of a dead process
  // whose pid was reused, or of an earlier failed write here.
  ::unlink(temporary.c_str());

  // The content is written and flushed while the file has no name (O_TMPFILE): a process killed
  // meanwhile leaves nothing behind. It gets the temporary name only for the instant before the
  // rename. Without O_TMPFILE, the named temporary is written directly.
  bool named = false;
  int fd = open_unnamed(path);
  if (fd >= 0) {
    try {
      write_and_flush(fd, content, temporary);
      named = name_unnamed(fd, temporary);
    } catch (...) {
      ::close(fd);
      throw;
    }
    if (!named) {
      ::close(fd);
      fd = -1;
    }
  }
  if (!named) {
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) fail("create", temporary);
    try {
      write_and_flush(fd, content, temporary);
    } catch (...) {
      ::close(fd);
      ::unlink(temporary.c_str());
      throw;
    }
  }
  if (::close(fd) != 0) {
    const std::string reason = system_reason();
    ::unlink(temporary.c_str());
    throw FatalError(ExitCode::runtime_error, "cannot close '" + temporary + "': " + reason);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = system_reason();
    ::unlink(temporary.c_str());
    throw FatalError(ExitCode::runtime_error, "cannot rename '" + temporary + "' to '" + path + "': " + reason);
  }
  const int dir_fd = ::open(parent_directory(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

void append_line_durable(const std::string& path, std::string_view line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) fail("open for appending", path);
  std::string record(line);
  record.push_back('\n');
  try {
    struct stat before {};
    if (::fstat(fd, &before) != 0) fail("inspect", path);
    // One write() of the whole record: O_APPEND makes it land after every earlier record.
    const ssize_t written = ::write(fd, record.data(), record.size());
    if (written < 0 || static_cast<std::size_t>(written) != record.size()) {
      // A full disk (or file size limit) can take part of the record: cut it off again, so that
      // the file still ends with a whole record and a resumed run never reads a torn line.
      const int reason = written < 0 ? errno : ENOSPC;
      if (written > 0 && S_ISREG(before.st_mode)) {
        // Best effort: when even the cut fails, the error below still reports the failed append.
        [[maybe_unused]] const int cut = ::ftruncate(fd, before.st_size);
      }
      errno = reason;
      fail("append a whole record to", path);
    }
    if (::fsync(fd) != 0) fail("flush", path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

void make_directories(const std::string& path) {
  if (path.empty()) throw UsageError("empty directory path");
  std::string prefix;
  std::size_t position = 0;
  while (position != std::string::npos) {
    position = path.find('/', position + 1);
    prefix = path.substr(0, position);
    if (prefix.empty() || prefix == "/") continue;
    struct stat info {};
    if (::lstat(prefix.c_str(), &info) == 0) {
      const bool is_last = position == std::string::npos || position + 1 == path.size();
      if (S_ISLNK(info.st_mode) && is_last) {
        throw FatalError(ExitCode::runtime_error, "refusing to use '" + prefix + "': it is a symbolic link");
      }
      if (S_ISLNK(info.st_mode)) {
        struct stat target {};
        if (::stat(prefix.c_str(), &target) == 0 && S_ISDIR(target.st_mode)) continue;
      }
      if (!S_ISDIR(info.st_mode) && !S_ISLNK(info.st_mode)) {
        throw FatalError(ExitCode::runtime_error, "cannot create directory '" + path + "': '" + prefix + "' is not a directory");
      }
      continue;
    }
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) fail("create directory", prefix);
  }
}

void check_writable_output(const std::string& path, std::string_view what) {
  if (path.empty()) throw UsageError(std::string(what) + ": empty output path");
  if (is_symlink(path)) throw UsageError(std::string(what) + ": '" + path + "' is a symbolic link; refusing to write through it");
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    throw UsageError(std::string(what) + ": '" + path + "' is a directory, expected a file path");
  }
  if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    throw UsageError(std::string(what) + ": '" + path + "' exists and is not a regular file (device, FIFO or socket)");
  }
  const std::string directory = parent_directory(path);
  if (::access(directory.c_str(), W_OK | X_OK) != 0) {
    throw UsageError(std::string(what) + ": cannot write into directory '" + directory + "': " + system_reason());
  }
}

std::string read_text_file(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) throw UsageError("cannot read '" + path + "': " + system_reason());
  if (!S_ISREG(info.st_mode)) throw UsageError("cannot read '" + path + "': not a regular file");
  std::ifstream stream(path, std::ios::binary);
  if (!stream) throw UsageError("cannot read '" + path + "': " + system_reason());
  std::ostringstream buffer;
  buffer << stream.rdbuf();
  return buffer.str();
}

}  // namespace cclbench
