#include "capture/launcher.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <utility>

extern char** environ;

namespace iotwin::capture {
namespace {

// What the child reports on the exec-error pipe.
struct ChildError {
  int stage;  // 0 exec, 1 setgroups, 2 setgid, 3 setuid
  int err;
};
const char* const kStageNames[] = {"exec", "setgroups", "setgid", "setuid"};

// Waits (briefly) until the child sleeps in its read of the go pipe, so that adding it to the
// traced set cannot catch that read's exit half-way or the child's last steps before it.
void WaitUntilBlocked(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  for (int i = 0; i < 5000; i++) {
    std::ifstream in(path);
    std::string stat;
    std::getline(in, stat);
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size()) return;  // gone
    char state = stat[paren + 2];
    if (state == 'S' || state == 'Z') return;
    usleep(200);
  }
}

}  // namespace

Result<UserCredentials> LookupUser(const std::string& name_or_uid) {
  UserCredentials u;
  std::vector<char> buf(16384);
  struct passwd pw, *found = nullptr;
  int rc = getpwnam_r(name_or_uid.c_str(), &pw, buf.data(), buf.size(), &found);
  if (!found) {
    uid_t uid = 0;
    auto [end, ec] =
        std::from_chars(name_or_uid.data(), name_or_uid.data() + name_or_uid.size(), uid);
    if (ec == std::errc() && end == name_or_uid.data() + name_or_uid.size()) {
      rc = getpwuid_r(uid, &pw, buf.data(), buf.size(), &found);
    }
  }
  if (!found) {
    if (rc != 0) return Status::FromErrno(rc, fmt::format("looking up user '{}'", name_or_uid));
    return Status::NotFound("--user {}: no such user (a user name or a numeric uid, e.g. "
                            "--user nobody)",
                            name_or_uid);
  }
  u.name = pw.pw_name;
  u.uid = pw.pw_uid;
  u.gid = pw.pw_gid;
  u.home = pw.pw_dir ? pw.pw_dir : "";
  int ngroups = 64;
  u.groups.resize(ngroups);
  while (getgrouplist(u.name.c_str(), u.gid, u.groups.data(), &ngroups) < 0) {
    u.groups.resize(ngroups + 64);
    ngroups = static_cast<int>(u.groups.size());
  }
  u.groups.resize(ngroups);
  return u;
}

Result<StoppedCommand> StoppedCommand::Start(const LaunchOptions& options) {
  if (options.argv.empty()) return Status::Invalid("no command to run");
  int go[2], err[2];
  if (pipe2(go, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  UniqueFd go_r(go[0]), go_w(go[1]);
  if (pipe2(err, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  UniqueFd err_r(err[0]), err_w(err[1]);

  // Everything the child needs is prepared before fork (no allocation after it).
  std::vector<char*> argv;
  for (const auto& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; e && *e; e++) {
    std::string_view kv(*e);
    bool overridden = false;
    for (const auto& s : options.set_env) {
      size_t eq = s.find('=');
      if (kv.substr(0, kv.find('=') + 1) == std::string_view(s).substr(0, eq + 1))
        overridden = true;
    }
    if (!overridden) env_storage.emplace_back(kv);
  }
  for (const auto& s : options.set_env) env_storage.push_back(s);
  std::vector<char*> envp;
  for (auto& s : env_storage) envp.push_back(s.data());
  envp.push_back(nullptr);

  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return Status::FromErrno(errno, "fork");
  if (pid == 0) {
    // Child: wait for the go, drop privileges, exec. Only async-signal-safe calls here.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    // No file-I/O system call before the read below: the tracer may add us to the traced set at
    // any moment, and the trace should begin with the command, not with the launcher. So a
    // tracer that dies is noticed by the parent-death signal rather than by closing our copy
    // of the pipe's write end.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    char c;
    ssize_t n;
    do {
      n = read(go_r.get(), &c, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) _exit(127);      // the tracer gave up
    prctl(PR_SET_PDEATHSIG, 0);  // the command itself may outlive iotwin
    ChildError ce{0, 0};
    if (options.user) {
      const UserCredentials& u = *options.user;
      if (setgroups(u.groups.size(), u.groups.data()) != 0) {
        ce = {1, errno};
      } else if (setgid(u.gid) != 0) {
        ce = {2, errno};
      } else if (setuid(u.uid) != 0) {
        ce = {3, errno};
      }
    }
    if (ce.stage == 0) {
      execvpe(argv[0], argv.data(), envp.data());
      ce = {0, errno};
    }
    ssize_t w = write(err_w.get(), &ce, sizeof ce);
    (void)w;
    _exit(127);
  }
  WaitUntilBlocked(pid);
  StoppedCommand cmd;
  cmd.pid_ = pid;
  cmd.go_ = std::move(go_w);
  cmd.exec_error_ = std::move(err_r);
  cmd.name_ = options.argv[0];
  return cmd;
}

StoppedCommand::StoppedCommand(StoppedCommand&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)),
      go_(std::move(o.go_)),
      exec_error_(std::move(o.exec_error_)),
      name_(std::move(o.name_)),
      released_(o.released_),
      exited_(o.exited_),
      status_(o.status_) {}

StoppedCommand::~StoppedCommand() {
  if (pid_ > 0 && !released_ && !exited_) {
    kill(pid_, SIGKILL);
    int st;
    waitpid(pid_, &st, 0);
  }
}

Status StoppedCommand::Release() {
  // Only our copy of the exec-error pipe's write end may stay open in the child: the parent's
  // was closed with the UniqueFd at the end of Start.
  char c = 1;
  if (write(go_.get(), &c, 1) != 1) return Status::FromErrno(errno, "releasing the command");
  released_ = true;
  go_.Reset();
  ChildError ce{};
  ssize_t n;
  do {
    n = read(exec_error_.get(), &ce, sizeof ce);
  } while (n < 0 && errno == EINTR);
  exec_error_.Reset();
  if (n == 0) return Status::Ok();  // EOF: exec closed the pipe
  Wait();
  if (n != sizeof ce) return Status::Internal("command {}: lost the exec status", name_);
  const char* stage = ce.stage >= 0 && ce.stage < 4 ? kStageNames[ce.stage] : "start";
  if (ce.stage == 0) {
    return Status::NotFound("cannot run '{}': {}", name_, strerror(ce.err));
  }
  return Status::Permission("cannot run '{}': {} failed: {}", name_, stage, strerror(ce.err));
}

int StoppedCommand::Terminate(int grace_ms) {
  if (exited_) return status_;
  kill(pid_, grace_ms > 0 ? SIGTERM : SIGKILL);
  for (int waited = 0; waited < grace_ms; waited += 10) {
    if (auto st = TryWait()) return *st;
    usleep(10'000);
  }
  if (auto st = TryWait()) return *st;
  kill(pid_, SIGKILL);
  return Wait();
}

std::optional<int> StoppedCommand::TryWait() {
  if (exited_) return status_;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    exited_ = true;
    status_ = st;
    return st;
  }
  return std::nullopt;
}

int StoppedCommand::Wait() {
  if (exited_) return status_;
  int st = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &st, 0);
  } while (r < 0 && errno == EINTR);
  exited_ = true;
  status_ = st;
  return st;
}

int ExitStatusFromWait(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

}  // namespace iotwin::capture
