// The project's multi-host harness (tests/clusters/multihost, README there) for the tests that
// run across its hosts: started once per test program (EPOCHRUN_MULTIHOST_HOSTS hosts, 3 unless
// the program defines it before including this) and stopped at its end, also when the program is
// killed; commands on a host, and mpirun across the hosts. Every program that uses it is run
// under `flock /tmp/multihost.lock` when others may share the machine.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "launch.hpp"
#include "test_support.hpp"

#ifndef EPOCHRUN_MULTIHOST_HOSTS
#define EPOCHRUN_MULTIHOST_HOSTS 3
#endif

namespace epochrun::testing {

// The harness's scripts, in this source tree.
const std::filesystem::path kHarness =
    std::filesystem::path(EPOCHRUN_SOURCE_DIR) / "tests" / "clusters" / "multihost";
// Always the default state directory, whatever the caller's environment says: the tests read
// the harness's files there (config, pids).
// MULTIHOST_N: EPOCHRUN_MULTIHOST_HOSTS, which a test program defines before it includes this
// header (3 unless).
const std::map<std::string, std::string> kHarnessEnvironment = {
    {"MULTIHOST_STATE", "/run/multihost"},
    {"MULTIHOST_N", std::to_string(EPOCHRUN_MULTIHOST_HOSTS)}};
inline std::vector<std::string> harness_hosts() {
  std::vector<std::string> hosts;
  for (int host = 1; host <= EPOCHRUN_MULTIHOST_HOSTS; ++host) {
    hosts.push_back("host" + std::to_string(host));
  }
  return hosts;
}
const std::vector<std::string> kHosts = harness_hosts();
// Where every run works: on the volume.
const std::filesystem::path kSharedBase = "/shared/epochrun-multihost-test";
// A job (start-up over host-exec included) that runs longer is hung.
constexpr double kJobEndsWithinSeconds = 120;
// A harness script or a command through host-exec that runs longer is hung.
constexpr double kCommandEndsWithinSeconds = 120;

// Stops the harness when this process ends in any way, SIGKILL included (ctest's timeout): a
// process of its own (a grandchild, so that nothing killing this process's children reaches it)
// waits on a pipe whose only writer is this process and runs stop-hosts.sh at its end of file,
// unless it was told that the harness has been stopped already.
class StopHarnessOnExit {
 public:
  StopHarnessOnExit() {
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
      return;
    }
    const std::string stop = (kHarness / "stop-hosts.sh").string();
    const pid_t child = ::fork();
    if (child == 0) {
      ::setsid();
      if (::fork() != 0) {
        ::_exit(0);
      }
      ::dup2(pipe_fds[0], 0);
      const int log =
          ::open("/tmp/epochrun-multihost-guard.log", O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(log, 1);
      ::dup2(log, 2);
      ::execl("/bin/bash", "bash", "-c",
              "read -r word; [ \"$word\" = stopped ] && exit 0; date; "
              "MULTIHOST_STATE=/run/multihost exec timeout -k 10 120 \"$0\"",
              stop.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(pipe_fds[0]);
    ::waitpid(child, nullptr, 0);
    write_end_ = pipe_fds[1];
  }
  ~StopHarnessOnExit() { dismiss(); }
  StopHarnessOnExit(const StopHarnessOnExit&) = delete;
  StopHarnessOnExit& operator=(const StopHarnessOnExit&) = delete;

  // The harness was stopped: the guard ends without doing anything.
  void dismiss() {
    if (write_end_ >= 0) {
      [[maybe_unused]] const auto written = ::write(write_end_, "stopped\n", 8);
      ::close(write_end_);
      write_end_ = -1;
    }
  }

 private:
  int write_end_ = -1;
};

// Runs a harness script or a host-exec command, failing the test when it does not end in time.
inline ProcessResult run_harness(const std::vector<std::string>& argv,
                                 double seconds = kCommandEndsWithinSeconds) {
  return run_within(argv, "/", seconds, kHarnessEnvironment);
}

// `command` run by the login shell of `host` (host-exec is ssh-like: one shell line).
inline ProcessResult on_host(const std::string& host, const std::string& command) {
  return run_harness({(kHarness / "host-exec").string(), host, command});
}

// Why this machine cannot have the harness's hosts, in one line; empty when it can. They need
// root, FUSE (each host's GlusterFS client) and network, mount and UTS namespaces (tried in a
// child process: a container may forbid them even to root).
inline std::string why_no_hosts_here() {
  if (::geteuid() != 0) {
    return "the multi-host harness needs root (network namespaces, mounts), and this runs as uid " +
           std::to_string(::geteuid());
  }
  const int fuse = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fuse < 0) {
    return std::string("the multi-host harness needs FUSE for its GlusterFS clients: /dev/fuse: ") +
           std::strerror(errno);
  }
  ::close(fuse);
  const pid_t child = ::fork();
  if (child == 0) {
    ::_exit(::unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWUTS) == 0 ? 0 : errno);
  }
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status)) {
    return "could not try making namespaces here (fork failed)";
  }
  if (WEXITSTATUS(status) != 0) {
    return std::string("the multi-host harness needs network, mount and UTS namespaces: ") +
           "unshare: " + std::strerror(WEXITSTATUS(status));
  }
  return "";
}

// Starts the harness once for the whole test program and stops it at the end.
class Harness : public ::testing::Environment {
 public:
  void SetUp() override {
    unavailable_ = why_no_hosts_here();
    if (!unavailable_.empty()) {
      return;
    }
    guard_ = std::make_unique<StopHarnessOnExit>();
    // About 5 to 20 s; more when it installs GlusterFS first.
    const auto started = run_harness({(kHarness / "start-hosts.sh").string()}, 300);
    up_ = started.exit_code == 0;
    ASSERT_TRUE(up_) << started.out << started.err;
    std::ifstream config("/run/multihost/config");
    for (std::string line; std::getline(config, line);) {
      if (line.rfind("SUBNET=", 0) == 0) {
        subnet_ = line.substr(7) + ".0/24";
      } else if (line.rfind("BRIDGE=", 0) == 0) {
        bridge_ = line.substr(7);
      }
    }
    ASSERT_FALSE(subnet_.empty() || bridge_.empty())
        << "no SUBNET or BRIDGE in /run/multihost/config";
  }
  void TearDown() override {
    if (guard_) {
      const auto stopped = run_harness({(kHarness / "stop-hosts.sh").string()});
      EXPECT_EQ(stopped.exit_code, 0) << stopped.out << stopped.err;
      guard_->dismiss();
    }
  }

  // Why the machine cannot have the hosts (every case then skips saying so); empty when it can.
  static inline std::string unavailable_;
  static inline bool up_ = false;
  static inline std::string subnet_;  // the bridge's, e.g. 10.77.7.0/24
  static inline std::string bridge_;  // its name, e.g. mhbr0: hostK's port is <bridge>pK

 private:
  std::unique_ptr<StopHarnessOnExit> guard_;
};

[[maybe_unused]] const auto* const kHarnessEnvironmentRegistered =
    ::testing::AddGlobalTestEnvironment(new Harness);

// The environment of a launcher: what Open MPI needs as root, and yielding ranks (3 hosts share
// 2 cores here; spinning ranks starve each other).
inline std::map<std::string, std::string> launcher_environment(const std::string& fault = "") {
  auto environment = kMpiEnvironment;
  environment["OMPI_MCA_mpi_yield_when_idle"] = "1";
  if (!fault.empty()) {
    environment["EPOCHRUN_FAULT"] = fault;
  }
  return environment;
}

// mpirun across the hosts (tests/clusters/README.md, "MPI across the hosts"): `hosts` as
// Open MPI's --host ("host1,host2:2,host3": ranks fill each host's slots in turn), TCP only,
// restricted to the bridge, the ranks working in `directory` on the volume. EPOCHRUN_FAULT
// reaches the ranks only through -x (host-exec clears the environment).
inline std::vector<std::string> program_on_hosts(const std::string& program,
                                                 const std::string& hosts, int ranks,
                                                 const std::filesystem::path& directory,
                                                 const std::vector<std::string>& args,
                                                 bool with_fault = false) {
  std::vector<std::string> argv = {MPIEXEC_BINARY,
                                   "--mca",
                                   "plm_rsh_agent",
                                   (kHarness / "host-exec").string(),
                                   "--mca",
                                   "plm_rsh_no_tree_spawn",
                                   "1",
                                   "--host",
                                   hosts,
                                   "-np",
                                   std::to_string(ranks),
                                   "--mca",
                                   "btl",
                                   "tcp,self",
                                   "--mca",
                                   "oob_tcp_if_include",
                                   Harness::subnet_,
                                   "--mca",
                                   "btl_tcp_if_include",
                                   Harness::subnet_,
                                   "--wdir",
                                   directory.string()};
  if (with_fault) {
    argv.insert(argv.end(), {"-x", "EPOCHRUN_FAULT"});
  }
  argv.push_back(program);
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// epochrun across the hosts, as program_on_hosts runs a program.
inline std::vector<std::string> epochrun_on_hosts(const std::string& hosts, int ranks,
                                                  const std::filesystem::path& directory,
                                                  const std::vector<std::string>& args,
                                                  bool with_fault = false) {
  return program_on_hosts(EPOCHRUN_BINARY, hosts, ranks, directory, args, with_fault);
}

// The PIDs of the processes running `binary` on `host` (one PID space for all hosts: a process
// is on a host when its network namespace is the host's).
inline std::vector<int> processes_on_host(const std::string& host,
                                          const std::filesystem::path& binary) {
  std::vector<int> pids;
  struct stat host_namespace {};
  if (::stat(("/run/netns/" + host).c_str(), &host_namespace) != 0) {
    return pids;
  }
  std::error_code error;
  const auto wanted = std::filesystem::canonical(binary, error);
  for (const auto& entry : list_directory("/proc")) {
    if (entry.empty() || !std::isdigit(static_cast<unsigned char>(entry[0]))) {
      continue;
    }
    const auto proc = std::filesystem::path("/proc") / entry;
    struct stat net {};
    if (::stat((proc / "ns/net").c_str(), &net) != 0 || net.st_ino != host_namespace.st_ino ||
        net.st_dev != host_namespace.st_dev) {
      continue;
    }
    if (std::filesystem::read_symlink(proc / "exe", error) == wanted) {
      pids.push_back(std::stoi(entry));
    }
  }
  return pids;
}

}  // namespace epochrun::testing
