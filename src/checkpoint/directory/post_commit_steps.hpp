// What happens to committed checkpoints besides the commit itself: rank 0's view of them,
// index.json (and the XDMF file of --xdmf) after each commit and index.json once more at the
// run's end, the retention policy, the upload of the final one, and the deletion once the job
// succeeded (--delete-checkpoints-on-success). A failure in any of these loses nothing
// committed: it is a warning (an upload failure also an exit code).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "background_index.hpp"
#include "background_removal.hpp"
#include "background_xdmf.hpp"
#include "checkpoint_index.hpp"
#include "checkpoint_options.hpp"
#include "epochrun/communicator.hpp"

namespace epochrun {

// What the upload of the final checkpoint came to, the same on every rank.
struct UploadOutcome {
  std::optional<std::string> destination;  // where it went
  std::optional<std::string> error;        // why it did not
};

class PostCommitSteps {
 public:
  // Collective. Without a checkpoint directory every step does nothing. Rank 0 removes what an
  // interrupted save left behind and seeds its view of the directory with one listing.
  PostCommitSteps(const Communicator& comm, const CheckpointOptions& options, std::string job);

  // Rank 0's view of the directory; null on the other ranks and without a directory.
  const CheckpointIndex* index() const { return index_ ? &*index_ : nullptr; }

  // Collective, after `epoch` was committed in a file of `file_bytes`: the index, then
  // retention. Returns the epochs retention deleted, on every rank.
  std::vector<std::int64_t> after_commit(std::int64_t epoch, std::uint64_t file_bytes);
  // Collective, once before the run ends: index.json rewritten from rank 0's view (the listing the
  // run started with and its own commits and deletions), and, when `last_valid` -- the epoch the
  // run committed last, or else the one it resumed from -- is the directory's newest, retention
  // applied as after its commit. So a run repairs what a run killed between a commit and these
  // steps left undone, even when it commits nothing itself (it found its job finished).
  // Returns the epochs retention deleted, on every rank.
  std::vector<std::int64_t> settle(std::optional<std::int64_t> last_valid);
  // Collective: copies the job's final checkpoint, `final_epoch` (nullopt when the run has
  // none), with options.uploader, once judge_checkpoint let it through (a warning and an
  // upload error otherwise); nullopt when there is no uploader.
  std::optional<UploadOutcome> upload(std::optional<std::int64_t> final_epoch) const;
  // Collective: deletes every checkpoint and the index (the job succeeded). Returns the
  // epochs deleted, on every rank.
  std::vector<std::int64_t> delete_all();
  // Rank 0 (elsewhere nothing): returns once index.json (and the XDMF file) hold the last
  // commit or deletion, which threads of their own write. Not collective.
  void wait_for_the_index();
  // Collective: the newest committed epoch in the directory.
  std::optional<std::int64_t> latest() const;
  // Rank 0 starts no deletion of a retired checkpoint while the returned hold lives (see
  // BackgroundRemoval::Hold); elsewhere it holds nothing.
  BackgroundRemoval::Hold hold_removals();
  // Before a save, on rank 0 (elsewhere nothing): when the retired checkpoints still to be
  // deleted may hold the room the save needs (the disk has less than twice their size and
  // 1 MiB free), deletes them first, hold or not. Not collective.
  void make_room_for_a_save();

 private:
  // Rank 0 deletes `chosen(index)` and the index is rewritten; every rank gets what went.
  template <typename Choose>
  std::vector<std::int64_t> delete_checkpoints(Choose&& choose, const std::string& why);
  // Rank 0: index.json and the XDMF file describe the view anew.
  void view_changed();

  const Communicator& comm_;
  const CheckpointOptions& options_;
  // Rank 0 with a directory: deletes what retention and delete_all retire, off the job's
  // thread; destroyed (waiting for the last deletion) with this.
  std::optional<BackgroundRemoval> removal_;
  std::optional<CheckpointIndex> index_;
  // Rank 0 with a directory: writes index.json off the job's thread; destroyed first, writing
  // the last text.
  std::optional<BackgroundIndex> index_writer_;
  // Rank 0 with a directory and an XDMF file: rewrites it off the job's thread.
  std::optional<BackgroundXdmf> xdmf_writer_;
};

}  // namespace epochrun
