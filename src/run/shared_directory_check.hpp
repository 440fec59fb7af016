// Proof, at the start of a run, that every rank sees the same checkpoint directory. Internal to
// the library.
//
// Why: every rank writes its part of each checkpoint into the directory rank 0 lays the file out
// in. A directory that is node-local on each host (or mounted differently on some ranks) makes
// every save fail on the ranks that do not see rank 0's file, and a job would run for days
// with nothing committed. Refused before the first epoch, it costs nothing.
#pragma once

#include <chrono>
#include <filesystem>

#include "epochrun/communicator.hpp"

namespace epochrun {

// Collective, before anything reads the directory. Rank 0 writes a file under a new name
// (".epochrun.shared-check.<random>", durably) and every other rank reads it back by that
// name; rank 0 then removes it. A brand-new name is read from the server by every client:
// none can have its contents or its absence cached. Throws CheckpointError on every rank,
// naming each rank (and its host) that does not see the file and why, when any does not. When
// rank 0 cannot write there at all, only warns (the saves will fail and say why). A rank that does
// not get through within `timeout` (stuck on the file system) ends the job
// (raise_if_any_failed_within). Nothing to check without a directory or on one rank.
// When the run holds the directory's lock (`locked`), rank 0 first removes the probe files (and
// their temporaries) of a check that crashed before its removal: their run is known to be gone.
void check_shared_directory(const Communicator& comm, const std::filesystem::path& directory,
                            std::chrono::duration<double> timeout, bool locked);

}  // namespace epochrun
