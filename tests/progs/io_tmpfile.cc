// An unnamed file made with O_TMPFILE in a directory, written, and given names: one with
// linkat(fd, "", dirfd, name, AT_EMPTY_PATH), one with linkat(AT_FDCWD, "/proc/self/fd/N",
// dirfd, name, AT_SYMLINK_FOLLOW) (the form that needs no CAP_DAC_READ_SEARCH).
//
// usage: io_tmpfile DIR   (DIR/sub is made; the names are DIR/sub/named and DIR/sub/named2),
// then a second unnamed file in DIR itself (there before the program ran), 5000 bytes, named
// DIR/top through /proc/self/fd. Prints "tmpfile: wrote N" on success (N: the first file's size).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: io_tmpfile DIR\n");
    return 2;
  }
  const std::string sub = std::string(argv[1]) + "/sub";
  if (mkdir(sub.c_str(), 0755) != 0) return std::perror("mkdir"), 1;
  int dirfd = open(sub.c_str(), O_RDONLY | O_DIRECTORY);
  int fd = open(sub.c_str(), O_TMPFILE | O_RDWR, 0644);
  if (dirfd < 0 || fd < 0) return std::perror("open"), 1;
  char block[4096];
  std::memset(block, 't', sizeof block);
  long total = 0;
  for (int i = 0; i < 3; i++) {
    if (write(fd, block, sizeof block) != static_cast<ssize_t>(sizeof block)) return 1;
    total += sizeof block;
  }
  if (pwrite(fd, block, 100, total) != 100) return 1;
  total += 100;
  if (pread(fd, block, 100, 0) != 100) return 1;
  if (linkat(fd, "", dirfd, "named", AT_EMPTY_PATH) != 0) return std::perror("linkat empty"), 1;
  char self[64];
  std::snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
  if (linkat(AT_FDCWD, self, dirfd, "named2", AT_SYMLINK_FOLLOW) != 0) {
    return std::perror("linkat proc"), 1;
  }
  if (fsync(fd) != 0) return 1;
  close(fd);
  close(dirfd);
  int top = open(argv[1], O_TMPFILE | O_WRONLY, 0600);
  if (top < 0 || write(top, block, 4096) != 4096 || write(top, block, 904) != 904) return 1;
  std::snprintf(self, sizeof self, "/proc/self/fd/%d", top);
  const std::string top_name = std::string(argv[1]) + "/top";
  if (linkat(AT_FDCWD, self, AT_FDCWD, top_name.c_str(), AT_SYMLINK_FOLLOW) != 0) return 1;
  close(top);
  std::printf("tmpfile: wrote %ld\n", total);
  return 0;
}
