#include "epochrun/stop_decision.hpp"

namespace epochrun {

const char* stop_kind_name(StopKind kind) {
  switch (kind) {
    case StopKind::kContinue:
      return "none";
    case StopKind::kStopCondition:
      return "stop_condition";
    case StopKind::kEpochLimit:
      return "epoch_limit";
    case StopKind::kPreempted:
      return "preempted";
    case StopKind::kTimeLimit:
      return "time_limit";
    case StopKind::kAlreadyStopped:
      return "already_stopped";
  }
  return "none";
}

}  // namespace epochrun
