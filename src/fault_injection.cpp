#include "fault_injection.hpp"

#include <mpi.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "epochrun/errors.hpp"

namespace epochrun {
namespace {

struct Fault {
  std::string phase;
  std::int64_t epoch = 0;
  std::optional<int> rank;  // every rank when unset
  int signal = SIGKILL;
  bool throws = false;  // THROW: an exception instead of a signal
  std::string spec;
};

Fault parse_fault(const std::string& spec) {
  auto bad = [&]() {
    return UsageError("invalid EPOCHRUN_FAULT '" + spec +
                      "': expected phase@epoch[:rank][:KILL|TERM|STOP|THROW]");
  };
  Fault fault;
  fault.spec = spec;
  const auto at = spec.find('@');
  if (at == std::string::npos) {
    throw bad();
  }
  fault.phase = spec.substr(0, at);
  std::string rest = spec.substr(at + 1);
  std::size_t used = 0;
  try {
    fault.epoch = std::stoll(rest, &used);
  } catch (const std::exception&) {
    throw bad();
  }
  rest = rest.substr(used);
  while (!rest.empty()) {
    if (rest.front() != ':') {
      throw bad();
    }
    rest = rest.substr(1);
    const auto end = rest.find(':');
    const std::string part = rest.substr(0, end);
    rest = end == std::string::npos ? "" : rest.substr(end);
    if (part == "KILL") {
      fault.signal = SIGKILL;
    } else if (part == "TERM") {
      fault.signal = SIGTERM;
    } else if (part == "STOP") {
      fault.signal = SIGSTOP;
    } else if (part == "THROW") {
      fault.throws = true;
    } else {
      try {
        fault.rank = std::stoi(part);
      } catch (const std::exception&) {
        throw bad();
      }
    }
  }
  return fault;
}

// Several faults, comma-separated: a test can pause a rank twice (a second signal mid-save).
std::vector<Fault> parse_faults(const char* text) {
  std::vector<Fault> faults;
  const std::string list = text == nullptr ? "" : text;
  std::size_t begin = 0;
  while (begin < list.size()) {
    const auto end = std::min(list.find(',', begin), list.size());
    faults.push_back(parse_fault(list.substr(begin, end - begin)));
    begin = end + 1;
  }
  return faults;
}

int world_rank() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int rank = 0;
  if (initialized) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  }
  return rank;
}

}  // namespace

void fault_point(std::string_view phase, std::int64_t epoch) {
  static const std::vector<Fault> faults = parse_faults(std::getenv("EPOCHRUN_FAULT"));
  for (const auto& fault : faults) {
    if (fault.phase != phase || fault.epoch != epoch) {
      continue;
    }
    if (fault.rank && *fault.rank != world_rank()) {
      continue;
    }
    if (fault.throws) {
      throw Error("injected fault (EPOCHRUN_FAULT=" + fault.spec + ")");
    }
    std::raise(fault.signal);
  }
}

}  // namespace epochrun
