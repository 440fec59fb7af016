// The seam between the saver and the levels a checkpoint goes to: the node-local copies
// (NodeLocalLevel, --local-dir) and the shared file in the checkpoint directory
// (SharedFileLevel). Internal to the library.
//
// Every checkpoint takes the same four steps through each level it goes to, in the order of
// its route (SaveRoute: node-local first, then the shared file):
//   begin   collective, the job waiting: what must be written or laid out before the job may
//           change its workspace; hands the next level the views it writes from (the
//           node-local copies, for the flush);
//   finish  what is left of this rank's part: now, or on a thread beside the job ("later": the
//           asynchronous write and the staged flush of the shared file; the node-local level's
//           background redundancy exchange is its own thread's, started by its commit);
//   commit  collective: waits for finish and commits;
//   done    the checkpoint committed or failed: what the level keeps of it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "pending_checkpoint_v3.hpp"
#include "save_outcome.hpp"

namespace epochrun {

// Where one checkpoint goes, chosen once at its start (CheckpointSaver::route).
struct SaveRoute {
  bool node_local = false;  // to the node-local level: every rank's copy first
  bool flushed = true;      // to the shared file in the checkpoint directory
  bool later = false;       // the shared file is written beside the job; complete() commits it
  bool snapshot = false;    // copied into memory first (later, without node-local copies)
};

class CheckpointLevel {
 public:
  virtual ~CheckpointLevel() = default;
  // Collective: takes checkpoint `epoch` of `blobs` (views that stay valid until finish is
  // done) by `route`, and returns the views the next level writes from. nullopt on every rank
  // when the level can take no checkpoint any more (its file system failed): the saver routes
  // the checkpoint again without it. Throws SaveError, the same on every rank, when the save
  // fails.
  virtual std::optional<std::vector<SavedBlob>> begin(std::int64_t epoch,
                                                      std::vector<SavedBlob> blobs,
                                                      const SaveRoute& route,
                                                      SaveOutcome& outcome) = 0;
  // This rank's part left after begin: now, or beside the job when `later`. Never throws: a
  // failure is kept for commit.
  virtual void finish(bool later) = 0;
  // Collective: waits for finish and commits what begin started (the shared file's commit
  // fills `outcome`'s commit record). Throws SaveError, the same on every rank.
  virtual void commit(SaveOutcome& outcome) = 0;
  // After the checkpoint committed at every level it went to (`committed`) or failed.
  virtual void done(bool committed) = 0;
};

}  // namespace epochrun
