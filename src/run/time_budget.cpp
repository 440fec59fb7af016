#include "time_budget.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>

#include "file_descriptor.hpp"

extern char** environ;

namespace epochrun {
namespace {

constexpr double kDefaultSlurmMarginSeconds = 60;
constexpr int kSqueueTimeoutMilliseconds = 10'000;

// Runs `argv` and returns its standard output, or nullopt when it cannot be started, fails or
// takes longer than `timeout_ms` (it is then killed).
std::optional<std::string> output_of(const std::vector<std::string>& argv, int timeout_ms) {
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
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
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

std::string trimmed(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t\r\n");
  const auto end = text.find_last_not_of(" \t\r\n");
  return begin == std::string::npos ? "" : text.substr(begin, end - begin + 1);
}

}  // namespace

TimeBudget::TimeBudget(Clock::time_point end, std::string source, double margin_seconds)
    : end_(end), source_(std::move(source)), margin_(margin_seconds) {}

double TimeBudget::seconds_left(Clock::time_point now) const {
  return end_ ? std::chrono::duration<double>(*end_ - now).count() : 0;
}

void TimeBudget::record_epoch(double seconds) {
  epochs_.push_back(seconds);
  if (epochs_.size() > kRecent) {
    epochs_.pop_front();
  }
}

void TimeBudget::record_save(double seconds) {
  saves_.push_back(seconds);
  if (saves_.size() > kRecent) {
    saves_.pop_front();
  }
}

double TimeBudget::longest(const std::deque<double>& durations) {
  return durations.empty() ? 0 : *std::max_element(durations.begin(), durations.end());
}

std::optional<std::string> TimeBudget::exhausted(Clock::time_point now) const {
  if (!end_) {
    return std::nullopt;
  }
  const double save = longest(saves_);
  const double needed = save + longest(epochs_) + save + margin_;
  const double left = seconds_left(now);
  if (needed <= left) {
    return std::nullopt;
  }
  return fmt::format(
      "time limit: {:.1f} s left ({}), but this checkpoint, the next epoch and its checkpoint "
      "need about {:.1f} s with the {:.0f} s margin (--time-margin)",
      std::max(left, 0.0), source_, needed, margin_);
}

std::optional<std::chrono::system_clock::time_point> parse_slurm_end_time(const std::string& text) {
  std::tm fields{};
  const char* end = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &fields);
  if (end == nullptr || *end != '\0') {
    return std::nullopt;
  }
  fields.tm_isdst = -1;  // squeue prints local time
  const std::time_t seconds = std::mktime(&fields);
  if (seconds == -1) {
    return std::nullopt;
  }
  return std::chrono::system_clock::from_time_t(seconds);
}

TimeBudget make_time_budget(TimeBudget::Clock::time_point program_start,
                            std::optional<double> budget_seconds,
                            std::optional<double> margin_seconds, const SlurmEnvironment& slurm) {
  const double margin = margin_seconds.value_or(slurm.job_id ? kDefaultSlurmMarginSeconds : 0.0);
  std::optional<TimeBudget::Clock::time_point> end;
  std::string source;
  if (budget_seconds) {
    end = program_start + std::chrono::duration_cast<TimeBudget::Clock::duration>(
                              std::chrono::duration<double>(*budget_seconds));
    source = fmt::format("--time-budget {} s", *budget_seconds);
  }
  if (slurm.job_id) {
    const auto output =
        output_of({"squeue", "-h", "-j", *slurm.job_id, "-o", "%e"}, kSqueueTimeoutMilliseconds);
    const auto text = output ? trimmed(*output) : "";
    if (const auto slurm_end = parse_slurm_end_time(text)) {
      const auto steady_end =
          TimeBudget::Clock::now() + std::chrono::duration_cast<TimeBudget::Clock::duration>(
                                         *slurm_end - std::chrono::system_clock::now());
      if (!end || steady_end < *end) {
        end = steady_end;
        source = "SLURM job " + *slurm.job_id + " ends at " + text;
      }
    } else if (!output) {
      spdlog::warn(
          "cannot ask SLURM for the end time of job {} (squeue failed or took over {} s): "
          "no time limit but --time-budget",
          *slurm.job_id, kSqueueTimeoutMilliseconds / 1000);
    }
  }
  if (!end) {
    return TimeBudget();
  }
  return TimeBudget(*end, source, margin);
}

}  // namespace epochrun
