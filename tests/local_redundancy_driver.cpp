// A small MPI program for the multihost test of --local-redundancy (multihost_redundancy_test):
//   local_redundancy_driver save    DIR EPOCH SCHEME KIB SEED
//     every rank writes its node-local part (local_redundancy_parts.hpp) into DIR and the ranks
//     protect them as SCHEME says (none, partner, xor:N); each rank prints
//     "rank R on HOST: copy xxh64 H";
//   local_redundancy_driver recover DIR EPOCH KIB SEED
//     the ranks recover the epoch's parts; rank 0 prints the report ("lost: 1 2", "host: ...",
//     "damaged: ..."), each rank with a part "rank R on HOST: copy xxh64 H, ok" (or what is wrong
//     with its values).
// Exit code 0 when the step ran (whatever was lost), 1 when it failed.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>
#include <sstream>

#include "epochrun/communicator.hpp"
#include "epochrun/mpi_session.hpp"
#include "host_name.hpp"
#include "local_recovery.hpp"
#include "local_redundancy.hpp"
#include "local_redundancy_file.hpp"
#include "local_redundancy_parts.hpp"

namespace {

using namespace epochrun;

std::string copy_line(const std::filesystem::path& dir, std::int64_t epoch, int rank) {
  const auto file = local_copy_file(dir, epoch, rank);
  const auto fd = open_regular_file_for_reading(file);
  return "rank " + std::to_string(rank) + " on " + host_name() + ": copy xxh64 " +
         std::to_string(file_xxh64(fd.get(), 0, file_size(fd.get()), file));
}

int run(int argc, char** argv, const Communicator& comm) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const std::vector<std::string> args(argv + 1, argv + argc);
  const RedundancyCall call{std::chrono::seconds(60), ""};
  if (args.size() > 1) {
    std::filesystem::create_directories(args[1]);
  }
  if (mode == "save" && args.size() == 6) {
    const std::filesystem::path dir = args[1];
    const auto epoch = std::stoll(args[2]);
    testing::write_part(dir, epoch, comm.rank(), comm.size(), std::stoull(args[5]),
                        std::stoul(args[4]));
    const auto stats =
        protect_local_copies(dir, epoch, comm, parse_local_redundancy(args[3]), call);
    if (comm.is_root()) {
      std::cout << "protected in " << stats.seconds << " s\n";
    }
    std::cout << copy_line(dir, epoch, comm.rank()) << std::endl;
    return 0;
  }
  if (mode == "recover" && args.size() == 5) {
    const std::filesystem::path dir = args[1];
    const auto epoch = std::stoll(args[2]);
    const auto report = recover_local_copies(dir, epoch, comm, call);
    if (comm.is_root()) {
      std::ostringstream out;
      out << "lost:";
      for (const int rank : report.unrecoverable) {
        out << " " << rank;
      }
      out << "\n";
      for (const auto& line : report.host_lines) {
        out << "host: " << line << "\n";
      }
      for (const auto& line : report.damaged) {
        out << "damaged: " << line << "\n";
      }
      std::cout << out.str() << std::flush;
    }
    comm.barrier();
    if (std::find(report.unrecoverable.begin(), report.unrecoverable.end(), comm.rank()) ==
        report.unrecoverable.end()) {
      const auto problem =
          testing::part_problem(dir, epoch, comm.rank(), std::stoull(args[4]), std::stoul(args[3]));
      std::cout << copy_line(dir, epoch, comm.rank()) << ", " << (problem.empty() ? "ok" : problem)
                << std::endl;
    }
    return 0;
  }
  std::cerr << "usage: local_redundancy_driver save DIR EPOCH SCHEME KIB SEED | recover DIR "
               "EPOCH KIB SEED\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  epochrun::MpiSession session(argc, argv);
  const auto comm = epochrun::Communicator::world();
  try {
    return run(argc, argv, comm);
  } catch (const std::exception& error) {
    std::cerr << "rank " << comm.rank() << ": " << error.what() << std::endl;
    return 1;
  }
}
