#include "subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "file_descriptor.hpp"

extern char** environ;

namespace epochrun {

std::optional<std::string> command_output(const std::vector<std::string>& argv,
                                          std::chrono::milliseconds timeout) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return std::nullopt;
  }
  FileDescriptor read_end(pipe_fds[0]);
  FileDescriptor write_end(pipe_fds[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const auto& arg : argv) {
    args.push_back(const_cast<char*>(arg.c_str()));
  }
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  write_end = FileDescriptor(-1);  // the child holds the write end now: EOF when it exits
  if (spawned != 0) {
    return std::nullopt;
  }
  std::string output;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd ready{read_end.get(), POLLIN, 0};
    if (left <= 0 || ::poll(&ready, 1, static_cast<int>(left)) == 0) {
      timed_out = true;
      break;
    }
    char buffer[256];
    const auto got = ::read(read_end.get(), buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      break;
    }
    output.append(buffer, static_cast<std::size_t>(got));
  }
  if (timed_out) {
    ::kill(pid, SIGKILL);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return std::nullopt;
  }
  return output;
}

}  // namespace epochrun
