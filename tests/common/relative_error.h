// How far one float vector is from another, the measure every driver test compares gradients
// with: one definition, so that a limit such as 1e-5 means the same thing in every test.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

namespace dlscale {

/// ‖got − want‖₂ / ‖want‖₂, summed in double; infinite when the sizes differ, so that a short
/// vector fails a limit instead of being read past its end.
inline double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    diff += d * d;
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff / norm);
}

}  // namespace dlscale
