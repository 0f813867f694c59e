// cached_open SPELLING DIR NAME: opens DIR/NAME (a file the caller has cached) by one spelling and
// reads its first page, for the tests of cache state matched by file identity:
//   relative  chdir DIR, open "./NAME"
//   dirfd     open DIR as a directory, openat(dirfd, "NAME")
//   renamed   chdir DIR, rename NAME to NAME.moved, open "NAME.moved" (the file the trace starts
//             with is DIR/NAME)
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <string>

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: cached_open relative|dirfd|renamed DIR NAME\n");
    return 2;
  }
  const std::string spelling = argv[1], dir = argv[2], name = argv[3];
  int fd = -1;
  if (spelling == "relative" || spelling == "renamed") {
    if (chdir(dir.c_str()) != 0) return perror("chdir"), 1;
    std::string open_as = "./" + name;
    if (spelling == "renamed") {
      open_as = name + ".moved";
      if (rename(name.c_str(), open_as.c_str()) != 0) return perror("rename"), 1;
    }
    fd = open(open_as.c_str(), O_RDONLY | O_CLOEXEC);
  } else if (spelling == "dirfd") {
    int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return perror("open dir"), 1;
    fd = openat(dfd, name.c_str(), O_RDONLY | O_CLOEXEC);
    close(dfd);
  } else {
    fprintf(stderr, "cached_open: unknown spelling %s\n", spelling.c_str());
    return 2;
  }
  if (fd < 0) return perror("open"), 1;
  char buf[4096];
  if (pread(fd, buf, sizeof buf, 0) != static_cast<ssize_t>(sizeof buf)) return perror("pread"), 1;
  close(fd);
  return 0;
}
