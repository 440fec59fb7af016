// What one save, or one step of an asynchronous one, did, as this rank saw it: what the saver
// returns to the runner, and what each level of a save fills in (checkpoint_level.hpp).
// Internal to the library.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "array_path.hpp"
#include "save_phases.hpp"

namespace epochrun {

struct SaveOutcome {
  std::int64_t epoch = 0;
  std::string log;             // "checkpoint epoch-000003.h5 1.2 MiB in ..." or the failure
  bool in_background = false;  // started, written while the job goes on: see complete()
  double seconds = 0;          // the whole save (begin to the end of its post-commit steps)
  double blocked_seconds = 0;  // of those, the job's thread was stopped for this step
  std::uint64_t bytes = 0;     // this rank's blob bytes
  bool committed = false;      // flushed and committed to the checkpoint directory
  bool node_local = false;     // saved node-local only, committed by its manifest (not flushed)
  std::optional<std::string> failure;  // the agreed error of a save that failed
  std::vector<std::int64_t> deleted;   // epochs the post-commit steps deleted after it
  // Where the save's time went on this rank (the whole save, once it completed) and the page
  // faults the process took while the job's thread was in it.
  SavePhases phases;
  // The path each global array took (the same on every rank), by name.
  std::vector<std::pair<std::string, ArrayPath>> array_paths;
};

}  // namespace epochrun
