#include "fault_injection.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
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
  bool waits = false;   // WAIT: blocks this thread until the release file exists
  std::string spec;
};

Fault parse_fault(const std::string& spec) {
  auto bad = [&]() {
    return UsageError("invalid EPOCHRUN_FAULT '" + spec +
                      "': expected phase@epoch[:rank][:KILL|TERM|STOP|THROW|WAIT]");
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
    } else if (part == "WAIT") {
      fault.waits = true;
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

// WAIT: polls for the file EPOCHRUN_FAULT_RELEASE names, for at most a minute (a test that
// never releases fails in bounded time; the run then goes on).
void wait_for_release(const Fault& fault) {
  const char* release = std::getenv("EPOCHRUN_FAULT_RELEASE");
  if (release == nullptr) {
    throw Error("EPOCHRUN_FAULT=" + fault.spec + " needs EPOCHRUN_FAULT_RELEASE");
  }
  for (int polls = 0; polls < 6000 && !std::filesystem::exists(release); ++polls) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

const std::vector<Fault>& planned_faults() {
  static const std::vector<Fault> faults = parse_faults(std::getenv("EPOCHRUN_FAULT"));
  return faults;
}

// The rank a fault's ":<rank>" is compared with; -1 until arm_fault_points says.
std::atomic<int> armed_rank{-1};

}  // namespace

void arm_fault_points(int rank) {
  (void)planned_faults();
  armed_rank.store(rank);
}

void fault_point(std::string_view phase, std::int64_t epoch) {
  for (const auto& fault : planned_faults()) {
    if (fault.phase != phase || fault.epoch != epoch) {
      continue;
    }
    if (fault.rank && *fault.rank != armed_rank.load()) {
      continue;
    }
    if (fault.throws) {
      throw Error("injected fault (EPOCHRUN_FAULT=" + fault.spec + ")");
    }
    if (fault.waits) {
      wait_for_release(fault);
      continue;
    }
    std::raise(fault.signal);
  }
}

}  // namespace epochrun
