// Three "hosts" on this machine for the process-level tests of the node-local level: mpiexec's
// rank R runs in a UTS namespace of its own (`unshare --uts`), whose host name is rt-h<R+1>, in
// the working directory CWD/h<R+1>. A relative --local-dir is then a directory of that host
// alone, and the copies, manifests and redundancy exchanges see three hosts, as on a cluster; the
// checkpoint directory, shared, is given as an absolute path. Losing a host is wiping its
// directory. Needs root (a new UTS namespace); can_name_hosts() says whether this machine can.
// Header-only because MPIEXEC_BINARY and EPOCHRUN_BINARY are compile definitions of the
// process-level test targets.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "launch.hpp"
#include "test_support.hpp"

namespace epochrun::testing {

inline constexpr int kHosts = 3;

// rt-h1, rt-h2, rt-h3: the host name of rank `rank`.
inline std::string host_of_rank(int rank) {
  return "rt-h" + std::to_string(rank + 1);
}

// CWD/h<R+1>: rank R's working directory, where its relative --local-dir lies.
inline std::filesystem::path host_dir(const std::filesystem::path& cwd, int rank) {
  return cwd / ("h" + std::to_string(rank + 1));
}

// Whether a process here can have a host name of its own (root, unshare present).
inline bool can_name_hosts() {
  ScratchDir scratch;
  return run_process({"unshare", "--uts", "--", "sh", "-c", "hostname rt-probe"}, scratch.path())
             .exit_code == 0;
}

// `epochrun args...` on three ranks, one a host: rank R named host_of_rank(R) in
// host_dir(cwd, R) (created here).
inline std::vector<std::string> epochrun_on_three_hosts(const std::filesystem::path& cwd,
                                                        const std::vector<std::string>& args) {
  std::vector<std::string> argv = {MPIEXEC_BINARY, "--oversubscribe"};
  for (int rank = 0; rank < kHosts; ++rank) {
    std::filesystem::create_directories(host_dir(cwd, rank));
    if (rank > 0) {
      argv.push_back(":");
    }
    // sh names the host ($0), then becomes the program ("$@"): mpiexec's child is the rank.
    argv.insert(argv.end(),
                {"-n", "1", "--wdir", host_dir(cwd, rank).string(), "unshare", "--uts", "--", "sh",
                 "-c", "hostname \"$0\" && exec \"$@\"", host_of_rank(rank), EPOCHRUN_BINARY});
    argv.insert(argv.end(), args.begin(), args.end());
  }
  return argv;
}

}  // namespace epochrun::testing
