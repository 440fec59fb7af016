// The median of a sample and how sure it is: what epochrun's benchmark and reports quote, since
// one slow round or epoch on a shared machine moves a mean but not a median.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
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

// The distribution-free interval that holds the median with at least 95% confidence: the k-th
// smallest and the k-th largest value, k the largest with P(Binomial(n, 1/2) < k) <= 2.5%.
// nullopt under 6 values, where even the smallest and largest are not 95% sure.
inline std::optional<std::pair<double, double>> median_interval(std::vector<double> values) {
  const auto n = values.size();
  double below = std::pow(0.5, double(n));  // P(X <= 0)
  double term = below;
  std::size_t k = 0;
  for (std::size_t i = 0; below <= 0.025 && i < n; ++i) {
    k = i + 1;
    term *= double(n - i) / double(i + 1);  // C(n, i + 1) / 2^n
    below += term;
  }
  if (k == 0) {
    return std::nullopt;
  }
  std::sort(values.begin(), values.end());
  return std::pair(values[k - 1], values[n - k]);
}

// Whether the median's 95% interval lies within +-`tolerance` of it.
inline bool median_is_stable(const std::vector<double>& values, double tolerance = 0.05) {
  const auto interval = median_interval(values);
  const double middle = median(values);
  return interval && interval->first >= middle * (1 - tolerance) &&
         interval->second <= middle * (1 + tolerance);
}

}  // namespace epochrun::cli
