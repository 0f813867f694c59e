// libbpf's messages and errors as the capture reports them: libbpf prints through one logger
// that keeps the last lines in memory, and a failed libbpf call becomes a Status whose message
// ends with those lines. Shared by every *Bpf loader.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace iotwin::capture {

// Routes libbpf's messages to the in-memory log (or, with IOTWIN_BPF_DEBUG=1, also to stderr).
// Idempotent.
void InstallLibbpfLogger();

// The messages libbpf printed since the last call, indented, and forgets them; "" when none.
std::string LibbpfLogTail();

// A failed libbpf call (`err`: errno, negative or positive) while doing `what`, with libbpf's
// last messages. EPERM/EACCES are permission errors, anything else "unsupported".
Status LibbpfError(int err, std::string_view what);

}  // namespace iotwin::capture
