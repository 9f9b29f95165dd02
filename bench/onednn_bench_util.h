// Small helpers the oneDNN benchmarks share: a steady clock, order statistics, parsing of
// comma-separated lists, and one driver training step timed phase by phase (no MPI: one
// process, so the all-reduce of a one-rank run, a no-op, is left out).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "drivers/driver.h"

namespace dlscale::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// The q-quantile (0..1) by linear interpolation between order statistics.
inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

inline double median(const std::vector<double>& v) { return quantile(v, 0.5); }

inline std::vector<std::string> split(const std::string& text, char sep = ',') {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, sep);) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

/// One training step's phases, in seconds.
struct StepTime {
  double forward = 0, backward = 0, update = 0;
  double total() const { return forward + backward + update; }
};

/// forward -> backward -> update, each closed by synchronize(), as `dlscale run --phases` times
/// them on one rank.
inline StepTime timed_step(Model& m, const Optimizer& opt) {
  StepTime t;
  Clock::time_point start = Clock::now();
  m.forward();
  m.synchronize();
  t.forward = seconds_since(start);
  start = Clock::now();
  m.backward();
  m.synchronize();
  t.backward = seconds_since(start);
  start = Clock::now();
  m.update(opt);
  m.synchronize();
  t.update = seconds_since(start);
  return t;
}

/// Medians of each phase over a run of steps.
struct StepStats {
  double forward = 0, backward = 0, update = 0, total = 0;
};

inline StepStats step_stats(const std::vector<StepTime>& steps) {
  std::vector<double> f, b, u, t;
  for (const StepTime& s : steps) {
    f.push_back(s.forward);
    b.push_back(s.backward);
    u.push_back(s.update);
    t.push_back(s.total());
  }
  return {median(f), median(b), median(u), median(t)};
}

}  // namespace dlscale::bench
