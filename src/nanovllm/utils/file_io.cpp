#include "nanovllm/utils/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "nanovllm/utils/error.h"

namespace nanovllm {

static const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "of an unknown type";
}

RegularFile::RegularFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one.
  fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw LoadError(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw LoadError(path + ": cannot stat (" + std::strerror(err) + ")");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw LoadError(path + ": not a regular file (it is " + kind_of(st.st_mode) + ")");
  }
  size = size_t(st.st_size);
}

RegularFile::~RegularFile() {
  if (fd >= 0) ::close(fd);
}

std::string read_regular_file(const std::string& path, size_t max_bytes) {
  RegularFile f(path);
  if (f.size > max_bytes)
    throw LoadError(path + ": " + std::to_string(f.size) + " bytes, more than the " + std::to_string(max_bytes) +
                    " this file may have");
  std::string out(f.size, '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(f.fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw LoadError(path + ": read error (" + std::strerror(errno) + ")");
    if (n == 0) break;  // shrank while we read: take what is there
    got += size_t(n);
  }
  out.resize(got);
  return out;
}

}  // namespace nanovllm
