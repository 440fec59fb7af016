// Why a run's epoch loop stops, and so which of the remaining steps still run.
#pragma once

#include <string>

#include "epochrun/export.hpp"

namespace epochrun {

enum class StopKind {
  kContinue,        // no stop: the loop goes on
  kStopCondition,   // one of the job's stop conditions held: the job is finished
  kEpochLimit,      // --num-epochs reached: the job is finished
  kPreempted,       // a preemption signal: stopped early, to be requeued
  kTimeLimit,       // the next epoch would not fit in the allocation: to be requeued
  kAlreadyStopped,  // the resumed checkpoint was already finished
};

// The summary's `stop_kind`: "stop_condition", "epoch_limit", "preempted", "time_limit",
// "already_stopped" ("none" for kContinue).
EPOCHRUN_API const char* stop_kind_name(StopKind kind);

struct StopDecision {
  StopKind kind = StopKind::kContinue;
  std::string reason;  // for the log and the summary; empty for kContinue

  bool stops() const { return kind != StopKind::kContinue; }
  // Stopped before the job was finished (preemption, time limit): the epoch's checkpoint is
  // written whatever the checkpoint policy says, the upload, download, exit and
  // delete-on-success steps (which belong to the finished job) are skipped, and the exit
  // code asks for a requeue.
  bool interrupted() const { return kind == StopKind::kPreempted || kind == StopKind::kTimeLimit; }
  bool finishes_job() const { return stops() && !interrupted(); }
};

}  // namespace epochrun
