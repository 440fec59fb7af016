#include "subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "file_descriptor.hpp"

extern char** environ;

namespace epochrun {
namespace {

using Clock = std::chrono::steady_clock;

// Starts `argv` with its standard output on `output` and its standard error on /dev/null;
// nullopt when it cannot be started.
std::optional<pid_t> spawn(const std::vector<std::string>& argv, int output) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, output, STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const auto& arg : argv) {
    args.push_back(const_cast<char*>(arg.c_str()));
  }
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return spawned == 0 ? std::optional<pid_t>(pid) : std::nullopt;
}

int milliseconds_until(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<decltype(left)>(left, 0));
}

// Appends what `fd` gives to `output` until its end (or a failed read): true; false when
// `deadline` comes first or it cannot be polled.
bool read_until(int fd, Clock::time_point deadline, std::string& output) {
  while (true) {
    const int left = milliseconds_until(deadline);
    pollfd ready{fd, POLLIN, 0};
    const int polled = left > 0 ? ::poll(&ready, 1, left) : 0;
    if (polled < 0 && errno == EINTR) {
      continue;
    }
    if (polled <= 0) {
      return false;
    }
    char buffer[256];
    const auto got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      return true;
    }
    output.append(buffer, static_cast<std::size_t>(got));
  }
}

// The wait status of `pid` once it has ended; nullopt when it still runs at `deadline` (its
// output's end does not mean its end: it may have closed it and gone on).
std::optional<int> wait_until(pid_t pid, Clock::time_point deadline) {
  while (true) {
    int status = 0;
    const pid_t ended = ::waitpid(pid, &status, WNOHANG);
    if (ended == pid) {
      return status;
    }
    if ((ended < 0 && errno != EINTR) || Clock::now() >= deadline) {
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

std::optional<std::string> command_output(const std::vector<std::string>& argv,
                                          std::chrono::milliseconds timeout) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return std::nullopt;
  }
  FileDescriptor read_end(pipe_fds[0]);
  FileDescriptor write_end(pipe_fds[1]);
  const auto pid = spawn(argv, write_end.get());
  write_end = FileDescriptor(-1);  // the child holds the write end now: EOF when it exits
  if (!pid) {
    return std::nullopt;
  }
  const auto deadline = Clock::now() + timeout;
  std::string output;
  std::optional<int> status;
  if (read_until(read_end.get(), deadline, output)) {
    status = wait_until(*pid, deadline);
  }
  if (!status) {
    kill_and_reap(*pid);
    return std::nullopt;
  }
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    return std::nullopt;
  }
  return output;
}

}  // namespace epochrun
