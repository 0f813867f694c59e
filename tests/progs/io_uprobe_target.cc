// io_uprobe_target N: calls iotwin_probe_target() N times (an exported, never-inlined function
// for --uprobe tests), each call doing one getpid; exits 0.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

extern "C" __attribute__((noinline, used)) int iotwin_probe_target(int i) {
  asm volatile("" ::: "memory");
  return static_cast<int>(getpid()) + i;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 3;
  long sum = 0;
  for (int i = 0; i < n; i++) sum += iotwin_probe_target(i);
  return sum == 0 ? 1 : 0;
}
