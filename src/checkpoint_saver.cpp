#include "checkpoint_saver.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "epochrun/checkpoint_directory.hpp"
#include "human_bytes.hpp"

namespace epochrun {

CheckpointSaver::CheckpointSaver(std::string job, const Communicator& comm,
                                 const RunOptions& options, std::vector<std::string> node_names,
                                 PostCommitSteps& post_commit)
    : job_(std::move(job)),
      comm_(comm),
      options_(options),
      node_names_(std::move(node_names)),
      post_commit_(post_commit) {}

void CheckpointSaver::resumed_from(std::int64_t epoch) {
  last_committed_ = epoch;
  last_commit_time_ = std::chrono::steady_clock::now();
}

SaveOutcome CheckpointSaver::save(std::int64_t epoch, const Workspace& workspace,
                                  RunSummary& summary) {
  SaveOutcome outcome;
  if (options_.checkpoint_dir.empty()) {
    outcome.log = "no checkpoints (--no-checkpoints)";
    return outcome;
  }
  const auto started = std::chrono::steady_clock::now();
  for (const auto& name : blobs_) {
    outcome.bytes += workspace.get(name).byte_size();
  }
  CheckpointHeader header;
  header.epoch = epoch;
  header.job = job_;
  header.node_names = node_names_;
  header.config_json = options_.config_json;
  try {
    const auto stats = CheckpointDirectory(options_.checkpoint_dir)
                           .save(comm_, header, workspace, blobs_, options_.save_timeout);
    outcome.committed = true;
    summary.committed.push_back(epoch);
    last_committed_ = epoch;
    last_commit_time_ = std::chrono::steady_clock::now();
    post_commit_.after_commit(epoch, stats.file_bytes, summary);
    outcome.log =
        fmt::format("checkpoint {} {} in {:.3f} s ({}/s)", stats.file.filename().string(),
                    human_bytes(double(stats.file_bytes)), stats.seconds,
                    human_bytes(double(stats.file_bytes) / std::max(stats.seconds, 1e-9)));
  } catch (const std::exception& error) {
    // The reference's contract: a checkpoint that cannot be written does not stop the job.
    // Every rank gets the same agreed error; rank 0 reports it once.
    if (comm_.is_root()) {
      spdlog::warn("checkpoint for epoch {} failed, the job goes on: {}", epoch, error.what());
    }
    summary.failed_saves.push_back(FailedSave{epoch, error.what()});
    outcome.log = "checkpoint FAILED (see warning)";
  }
  outcome.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return outcome;
}

}  // namespace epochrun
