// The median of a sample: what epochrun's benchmark and reports quote, since one slow round or
// epoch on a shared machine moves a mean but not a median.
#pragma once

#include <algorithm>
#include <vector>

namespace epochrun::cli {

// 0 for an empty sample.
inline double median(std::vector<double> values) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  const auto n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace epochrun::cli
