// StoppedCommand: a command started in a child process that waits, before exec, until the
// tracer has added it to the traced set and attached, so capture misses nothing at start-up.
//
// The child blocks reading a "go" pipe; Release() writes to it. An exec failure comes back on a
// close-on-exec pipe (empty at EOF means exec succeeded), so "command not found" is a clear
// error instead of an exit status of 127 from a trace that looks like a run.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/status.h"

namespace iotwin::capture {

// Credentials the command runs with (`--user`).
struct UserCredentials {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::string home;
};
Result<UserCredentials> LookupUser(const std::string& name_or_uid);

struct LaunchOptions {
  std::vector<std::string> argv;        // argv[0] is searched in PATH
  std::vector<std::string> set_env;     // "NAME=value" added to the environment
  std::optional<UserCredentials> user;  // drop privileges before exec
};

class StoppedCommand {
 public:
  static Result<StoppedCommand> Start(const LaunchOptions& options);
  StoppedCommand(StoppedCommand&& o) noexcept;
  StoppedCommand& operator=(StoppedCommand&&) = delete;
  // A child never released is killed and reaped.
  ~StoppedCommand();

  pid_t pid() const { return pid_; }
  // Lets the child exec; an error if it could not (the child is then reaped).
  Status Release();
  // Non-blocking wait: the wait status once the child has exited.
  std::optional<int> TryWait();
  // Blocking wait.
  int Wait();
  // SIGTERM, then SIGKILL when it has not exited after `grace_ms` (at once when 0); reaps it and
  // returns its wait status.
  int Terminate(int grace_ms);
  bool exited() const { return exited_; }

 private:
  StoppedCommand() = default;
  pid_t pid_ = -1;
  UniqueFd go_;
  UniqueFd exec_error_;
  std::string name_;
  bool released_ = false;
  bool exited_ = false;
  int status_ = 0;
};

// Exit status of iotwin for a child wait status: the exit code, or 128+signal.
int ExitStatusFromWait(int wait_status);

}  // namespace iotwin::capture
