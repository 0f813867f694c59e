// io_forker DATAFILE N: forks N children one after another (each alive while the next ones
// start, at most 64 at a time); child i preads 512 bytes at offset 512*i of an inherited
// descriptor and exits with status i % 100. The parent reaps them all and exits 0.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: io_forker DATAFILE N\n");
    return 2;
  }
  int fd = open(argv[1], O_RDONLY);
  if (fd < 0) {
    perror(argv[1]);
    return 2;
  }
  int n = atoi(argv[2]), alive = 0, failures = 0;
  static char buf[512];
  for (int i = 0; i < n; i++) {
    pid_t p = fork();
    if (p < 0) {
      perror("fork");
      return 1;
    }
    if (p == 0) {
      _exit(pread(fd, buf, sizeof buf, 512L * i) == sizeof buf ? i % 100 : 200);
    }
    if (++alive >= 64) {
      int st;
      if (wait(&st) > 0) alive--;
      if (!WIFEXITED(st) || WEXITSTATUS(st) == 200) failures++;
    }
  }
  int st;
  while (wait(&st) > 0) {
    if (!WIFEXITED(st) || WEXITSTATUS(st) == 200) failures++;
  }
  return failures ? 1 : 0;
}
