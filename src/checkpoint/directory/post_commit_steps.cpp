#include "post_commit_steps.hpp"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "checkpoint_directory_admin.hpp"
#include "checkpoint_judge.hpp"
#include "collective_errors.hpp"
#include "disk_space.hpp"
#include "epochrun/errors.hpp"
#include "regular_file.hpp"

namespace epochrun {

PostCommitSteps::PostCommitSteps(const Communicator& comm, const CheckpointOptions& options,
                                 std::string job)
    : comm_(comm), options_(options) {
  run_on_root_then_agree(comm_, "checkpoint directory", [&] {
    if (options_.checkpoint_dir.empty()) {
      return;
    }
    CheckpointDirectory directory(options_.checkpoint_dir);
    // A run killed inside a save leaves its temporary file behind: give that space back, once
    // the lock shows that its run is gone.
    if (const int stale =
            options_.directory_locked ? remove_stale_checkpoint_temporaries(directory) : 0;
        stale > 0) {
      spdlog::info("removed {} temporary file(s) of an interrupted save", stale);
    }
    removal_.emplace(directory.path());
    index_.emplace(std::move(directory), std::move(job));
    index_writer_.emplace(*index_);
    if (!options_.xdmf_file.empty()) {
      xdmf_writer_.emplace(*index_, options_.xdmf_file);
      xdmf_writer_->changed();  // the epochs of earlier runs, before any commit of this one
    }
  });
}

std::vector<std::int64_t> PostCommitSteps::after_commit(std::int64_t epoch,
                                                        std::uint64_t file_bytes) {
  if (index_) {
    index_->add(epoch, file_bytes);
  }
  if (options_.retention.keeps_everything()) {
    if (index_) {
      view_changed();
    }
    return {};
  }
  return delete_checkpoints(
      [&](const CheckpointIndex& index) {
        return options_.retention.epochs_to_delete(index.epochs(), epoch);
      },
      "retention after epoch " + std::to_string(epoch));
}

std::vector<std::int64_t> PostCommitSteps::settle(std::optional<std::int64_t> last_valid) {
  return delete_checkpoints(
      [&](const CheckpointIndex& index) {
        // Only the directory's newest epoch can be one whose retention a killed run left undone;
        // an older one the run resumed from was asked for, and saves that failed since commit
        // nothing that retention may follow.
        return last_valid && last_valid == index.latest()
                   ? options_.retention.epochs_to_delete(index.epochs(), *last_valid)
                   : std::vector<std::int64_t>{};
      },
      "retention at the end of the run");
}

std::optional<UploadOutcome> PostCommitSteps::upload(
    std::optional<std::int64_t> final_epoch) const {
  if (!options_.uploader) {
    return std::nullopt;
  }
  std::string destination;
  std::string failure;
  if (comm_.is_root()) {
    try {
      if (!final_epoch) {
        throw Error("this run has no committed checkpoint to upload");
      }
      const auto file = CheckpointDirectory(options_.checkpoint_dir).file_for(*final_epoch);
      // Nothing that does not verify leaves the program: a copy elsewhere would be trusted
      // there as the job's final state.
      try {
        (void)judge_checkpoint(open_regular_file_for_reading(file).get(), file.string());
      } catch (const CheckpointError& error) {
        throw Error("not uploading " + file.filename().string() +
                    ", it does not verify: " + error.what());
      }
      destination = options_.uploader->upload(file);
      spdlog::info("uploaded {} to {}", file.filename().string(), destination);
    } catch (const std::exception& error) {
      failure = error.what();
      spdlog::warn("upload failed: {}", failure);
    }
  }
  comm_.broadcast(destination);
  comm_.broadcast(failure);
  UploadOutcome outcome;
  if (!failure.empty()) {
    outcome.error = failure;
  } else {
    outcome.destination = destination;
  }
  return outcome;
}

std::vector<std::int64_t> PostCommitSteps::delete_all() {
  auto deleted = delete_checkpoints([](const CheckpointIndex& index) { return index.epochs(); },
                                    "deletion after success");
  if (comm_.is_root() && index_) {
    wait_for_the_index();  // no write after the removal recreates it
    std::error_code ignored;
    std::filesystem::remove(options_.checkpoint_dir / kIndexFileName, ignored);
    spdlog::info("the job succeeded: its checkpoints in {} were deleted",
                 options_.checkpoint_dir.string());
  }
  return deleted;
}

void PostCommitSteps::wait_for_the_index() {
  if (index_writer_) {
    index_writer_->flush();
  }
  if (xdmf_writer_) {
    xdmf_writer_->flush();
  }
}

void PostCommitSteps::view_changed() {
  index_writer_->changed();
  if (xdmf_writer_) {
    xdmf_writer_->changed();
  }
}

std::optional<std::int64_t> PostCommitSteps::latest() const {
  std::int64_t newest = -1;
  if (index_) {
    newest = index_->latest().value_or(-1);
  }
  comm_.broadcast(newest);
  return newest >= 0 ? std::optional(newest) : std::nullopt;
}

BackgroundRemoval::Hold PostCommitSteps::hold_removals() {
  return BackgroundRemoval::Hold(removal_ ? &*removal_ : nullptr);
}

void PostCommitSteps::make_room_for_a_save() {
  if (!removal_) {
    return;
  }
  const auto pending = removal_->pending_bytes();
  if (pending == 0) {
    return;
  }
  // The next checkpoint is most often the size of the last ones; the MiB covers the fixed
  // allowance a small checkpoint's space check adds.
  const auto available = available_bytes(options_.checkpoint_dir);
  if (available && *available < 2 * pending + (std::uint64_t{1} << 20)) {
    removal_->finish_pending();
  }
}

template <typename Choose>
std::vector<std::int64_t> PostCommitSteps::delete_checkpoints(Choose&& choose,
                                                              const std::string& why) {
  // A failure here loses nothing (the checkpoints stay), so it is a warning.
  std::vector<std::int64_t> deleted;
  if (index_) {
    std::optional<std::string> failure;
    auto retired = index_->retire(choose(*index_), failure);
    deleted = std::move(retired.gone);
    view_changed();
    for (auto& [epoch, file] : retired.renamed) {
      removal_->remove(epoch, std::move(file));
    }
    if (failure) {
      spdlog::warn("{}: {}", why, *failure);
    }
  }
  comm_.broadcast(deleted);
  return deleted;
}

}  // namespace epochrun
