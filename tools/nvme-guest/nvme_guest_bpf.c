// nvme_guest_bpf: loads nvme_probe.bpf.c with a statically linked libbpf, attaches its classic
// tracepoint and tp_btf programs on the NVMe tracepoints, runs a command, and prints every NVMe
// event seen while it ran. A stand-in, inside the emulated NVMe guest, for what
// `iotwin record --layers nvme` will do.
//
// Usage: nvme_guest_bpf [-v] [--] COMMAND [ARGS...]
// Output (stdout), one line each:
//   attach PROGRAM ok|error=MESSAGE
//   event src=tp|btf kind=setup qid=Q cid=C nsid=N opcode=0xOP slba=S nlb=L
//   event src=tp kind=complete qid=Q cid=C status=0xS
//   summary attached=A of=P events=E dropped=D command_status=S
// Exit status: the command's, when every program attached; 3 when one did not; 2 on bad usage.
#define _GNU_SOURCE
#include <bpf/libbpf.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nvme_probe.skel.h"
#include "nvme_probe_event.h"

static int verbose;
static unsigned long long event_count;

static int PrintLibbpf(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (level == LIBBPF_DEBUG && !verbose) return 0;
  return vfprintf(stderr, fmt, args);
}

static int OnEvent(void* ctx, void* data, size_t size) {
  (void)ctx;
  if (size < sizeof(struct nvme_probe_event)) return 0;
  const struct nvme_probe_event* e = data;
  event_count++;
  const char* src = e->source == kSourceBtf ? "btf" : "tp";
  if (e->kind == kKindComplete) {
    printf("event src=%s kind=complete qid=%d cid=%u status=0x%x\n", src, e->qid, e->cid,
           e->status);
  } else {
    printf("event src=%s kind=setup qid=%d cid=%u nsid=%u opcode=0x%02x slba=%llu nlb=%u\n", src,
           e->qid, e->cid, e->nsid, e->opcode, (unsigned long long)e->slba, e->nlb);
  }
  return 0;
}

int main(int argc, char** argv) {
  int first = 1;
  while (first < argc && argv[first][0] == '-') {
    if (strcmp(argv[first], "-v") == 0) {
      verbose = 1;
      first++;
    } else if (strcmp(argv[first], "--") == 0) {
      first++;
      break;
    } else {
      fprintf(stderr, "usage: nvme_guest_bpf [-v] [--] COMMAND [ARGS...]\n");
      return 2;
    }
  }
  if (first >= argc) {
    fprintf(stderr, "usage: nvme_guest_bpf [-v] [--] COMMAND [ARGS...]\n");
    return 2;
  }
  libbpf_set_print(PrintLibbpf);

  struct nvme_probe_bpf* skel = nvme_probe_bpf__open_and_load();
  if (!skel) {
    printf("load error=%s\n", strerror(errno));
    return 3;
  }
  printf("load ok\n");

  struct bpf_program* programs[] = {skel->progs.on_setup_tp, skel->progs.on_setup_btf,
                                    skel->progs.on_complete_tp};
  const int program_count = (int)(sizeof(programs) / sizeof(programs[0]));
  struct bpf_link* links[sizeof(programs) / sizeof(programs[0])] = {0};
  int attached = 0;
  for (int i = 0; i < program_count; i++) {
    links[i] = bpf_program__attach(programs[i]);
    if (links[i]) {
      attached++;
      printf("attach %s ok\n", bpf_program__section_name(programs[i]));
    } else {
      printf("attach %s error=%s\n", bpf_program__section_name(programs[i]), strerror(errno));
    }
  }
  fflush(stdout);

  struct ring_buffer* ring = ring_buffer__new(bpf_map__fd(skel->maps.events), OnEvent, NULL, NULL);
  if (!ring) {
    printf("ringbuf error=%s\n", strerror(errno));
    return 3;
  }

  pid_t child = fork();
  if (child < 0) {
    printf("fork error=%s\n", strerror(errno));
    return 3;
  }
  if (child == 0) {
    execvp(argv[first], argv + first);
    fprintf(stderr, "nvme_guest_bpf: exec %s: %s\n", argv[first], strerror(errno));
    _exit(127);
  }
  int wait_status = 0;
  for (;;) {
    ring_buffer__poll(ring, 100);
    pid_t done = waitpid(child, &wait_status, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR) {
      printf("waitpid error=%s\n", strerror(errno));
      return 3;
    }
  }
  // Completions of the command's last I/O are already in the ring: it waited for them.
  while (ring_buffer__consume(ring) > 0) {
  }
  int command_status =
      WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);

  unsigned int zero = 0;
  unsigned long long dropped = 0;
  bpf_map__lookup_elem(skel->maps.dropped, &zero, sizeof(zero), &dropped, sizeof(dropped), 0);
  printf("summary attached=%d of=%d events=%llu dropped=%llu command_status=%d\n", attached,
         program_count, event_count, dropped, command_status);

  ring_buffer__free(ring);
  for (int i = 0; i < program_count; i++) bpf_link__destroy(links[i]);
  nvme_probe_bpf__destroy(skel);
  return attached == program_count ? command_status : 3;
}
