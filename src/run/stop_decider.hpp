// The stop decision after each epoch: every rank reports the stop conditions that hold on its
// node and whether it received a preemption signal; rank 0 decides for everyone and
// broadcasts, so that all ranks leave the loop after the same epoch. Internal to the library.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "epochrun/communicator.hpp"
#include "epochrun/job.hpp"
#include "epochrun/stop_decision.hpp"
#include "time_budget.hpp"

namespace epochrun {

class StopDecider {
 public:
  // `budget` is rank 0's (it alone decides).
  StopDecider(const Job& job, const Communicator& comm, std::vector<std::string> node_names,
              std::optional<std::int64_t> num_epochs, const TimeBudget& budget);

  // Collective, after `epoch` ran (or on the epoch a run resumed from). A finished job (a
  // stop condition, --num-epochs) wins over a preemption or the time limit at the same time.
  StopDecision after_epoch(const Workspace& workspace, std::int64_t epoch) const;
  // Collective, between two epochs: a preemption signal that came after the last decision
  // (during the checkpoint, say) stops the run before it starts another epoch.
  StopDecision between_epochs() const;

 private:
  // Gathers each rank's holding conditions and signal to rank 0, which decides; every rank
  // returns the broadcast decision. `epoch` is checked against --num-epochs and the time
  // limit when set.
  StopDecision decide(const std::vector<std::string>& holding,
                      std::optional<std::int64_t> epoch) const;

  const Job& job_;
  const Communicator& comm_;
  std::vector<std::string> node_names_;
  std::optional<std::int64_t> num_epochs_;
  const TimeBudget& budget_;
};

}  // namespace epochrun
