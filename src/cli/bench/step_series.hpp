// Where rank 0's time went in a measure, step by step (step_times.hpp), round by round: the
// medians a bench row reports under "steps", which the table prints after the ratios.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "bench/median.hpp"

namespace epochrun::cli {

struct StepSeries {
  std::map<std::string, std::vector<double>> seconds;

  void add(const std::vector<std::pair<std::string, double>>& steps) {
    for (const auto& [step, spent] : steps) {
      seconds[step].push_back(spent);
    }
  }

  // Each step's median seconds.
  nlohmann::json medians() const {
    auto out = nlohmann::json::object();
    for (const auto& [step, spent] : seconds) {
      out[step] = median(spent);
    }
    return out;
  }
};

}  // namespace epochrun::cli
