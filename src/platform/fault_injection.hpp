// A documented test switch for reaching short phases deterministically (docs/TESTING.md):
//
//   EPOCHRUN_FAULT="<phase>@<epoch>[:<rank>][:KILL|TERM|STOP|THROW|WAIT][,<another>...]"
//
// makes that rank (every rank when omitted) send itself the signal (KILL when omitted) when it
// reaches that phase of that epoch; STOP pauses it there until a SIGCONT, so that a test can
// change the world (fill the disk, say) at exactly that instant; THROW throws an epochrun::Error
// there instead, as a failing task would; WAIT blocks the thread that reached it (only that one:
// an asynchronous save's background write, say) until the file EPOCHRUN_FAULT_RELEASE names
// exists, a minute at most. Phases: start-up (epoch 0 only: `epochrun run` before MPI_Init, its
// options parsed, the preemption signals caught), <group>-task (init-task, epoch-task,
// download-task, exit-task: inside that group, before its first task), epoch (after the epoch
// group ran, before its checkpoint), save-lay-out (rank 0 inside a save: the temporary file
// created by HDF5 and its space reserved, not laid out yet), save-create (inside a save, the
// temporary file laid out, none of this rank's data written), save-write (data written, file not
// yet closed), save-write-array (inside a save with global arrays, before the write of each:
// before the collective write, on the thread that writes them -- the main thread, or an
// asynchronous save's background thread when MPI runs at MPI_THREAD_MULTIPLE -- the ranks then
// agreeing; or, for a block each rank writes directly, in the data step; THROW fails the save
// everywhere),
// save-redundancy (a node-local epoch's copies written, agreed and, in an asynchronous run,
// committed unprotected; before its redundancy exchange across hosts, on the thread that runs
// it -- the main thread, or an asynchronous run's background exchange),
// save-before-rename (the file is complete and durable under its temporary name),
// save-after-rename (committed, the index not yet updated), remove (rank 0's deletion
// thread: that epoch's retired checkpoint renamed away, not yet deleted), upload (the copy is
// written but not yet renamed). Unset: no cost beyond one getenv at the first fault point.
#pragma once

#include <cstdint>
#include <string_view>

namespace epochrun {

void fault_point(std::string_view phase, std::int64_t epoch);

// Reads EPOCHRUN_FAULT and records this process's rank, which a fault's ":<rank>" names (a
// fault with a rank fires nowhere before this call). The runner calls it on the main thread
// before its first fault point, so that background threads (an asynchronous save's data step)
// reaching fault points only read what is already set.
void arm_fault_points(int rank);

}  // namespace epochrun
