#include "stop_decider.hpp"

#include <map>

#include "collective_errors.hpp"
#include "preemption_signals.hpp"

namespace epochrun {
namespace {

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string text;
  for (const auto& part : parts) {
    text += (text.empty() ? "" : separator) + part;
  }
  return text;
}

// One rank's report: its signal (0: none) on the first line, then one holding condition a line.
std::vector<std::string> split_lines(const std::vector<std::byte>& bytes) {
  const std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  std::vector<std::string> lines;
  std::size_t begin = 0;
  while (begin < text.size()) {
    const auto end = std::min(text.find('\n', begin), text.size());
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

}  // namespace

StopDecider::StopDecider(const Job& job, const Communicator& comm,
                         std::vector<std::string> node_names,
                         std::optional<std::int64_t> num_epochs, const TimeBudget& budget)
    : job_(job),
      comm_(comm),
      node_names_(std::move(node_names)),
      num_epochs_(num_epochs),
      budget_(budget) {}

StopDecision StopDecider::after_epoch(const Workspace& workspace, std::int64_t epoch) const {
  std::vector<std::string> holding;
  run_then_agree(comm_, "stop conditions after epoch " + std::to_string(epoch), [&] {
    for (const auto& condition : job_.stop_conditions()) {
      if (condition.holds(workspace)) {
        holding.push_back(condition.name);
      }
    }
  });
  return decide(holding, epoch);
}

StopDecision StopDecider::between_epochs() const {
  return decide({}, std::nullopt);
}

StopDecision StopDecider::decide(const std::vector<std::string>& holding,
                                 std::optional<std::int64_t> epoch) const {
  const std::string mine = std::to_string(PreemptionSignals::received()) +
                           (holding.empty() ? "" : "\n") + join(holding, "\n");
  const auto reports = comm_.gather(std::as_bytes(std::span(mine.data(), mine.size())));

  StopDecision decision;
  if (comm_.is_root()) {
    std::map<std::string, std::vector<std::string>> nodes_by_condition;
    std::string preemption;
    for (std::size_t rank = 0; rank < reports.size(); ++rank) {
      const auto lines = split_lines(reports[rank]);
      const int signal = lines.empty() ? 0 : std::stoi(lines.front());
      if (signal != 0 && preemption.empty()) {
        preemption = "preempted (" + signal_name(signal) + " on rank " + std::to_string(rank) + ")";
      }
      for (std::size_t i = 1; i < lines.size(); ++i) {
        nodes_by_condition[lines[i]].push_back(node_names_[rank]);
      }
    }
    std::vector<std::string> reasons;
    for (const auto& [condition, nodes] : nodes_by_condition) {
      reasons.push_back("stop condition '" + condition + "' on " +
                        (nodes.size() == node_names_.size() ? "every node" : join(nodes, ", ")));
    }
    if (!reasons.empty()) {
      decision.kind = StopKind::kStopCondition;
    }
    if (epoch && num_epochs_ && *epoch >= *num_epochs_) {
      reasons.push_back("epoch limit " + std::to_string(*num_epochs_) + " (--num-epochs)");
      if (!decision.stops()) {
        decision.kind = StopKind::kEpochLimit;
      }
    }
    if (!preemption.empty()) {
      reasons.push_back(preemption);
      if (!decision.stops()) {
        decision.kind = StopKind::kPreempted;
      }
    }
    if (epoch && !decision.stops()) {
      if (auto limit = budget_.exhausted(std::chrono::steady_clock::now())) {
        reasons.push_back(*limit);
        decision.kind = StopKind::kTimeLimit;
      }
    }
    decision.reason = join(reasons, "; ");
  }
  auto kind = static_cast<std::int64_t>(decision.kind);
  comm_.broadcast(kind);
  comm_.broadcast(decision.reason);
  decision.kind = static_cast<StopKind>(kind);
  return decision;
}

}  // namespace epochrun
