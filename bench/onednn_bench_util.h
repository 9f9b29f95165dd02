// Small helpers the oneDNN benchmarks share: a steady clock, parsing of
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
#include "suite/meters/statistics.h"

namespace dlscale::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline std::vector<std::string> split(const std::string& text, char sep = ',') {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, sep);) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

/// A benchmark case "workload:batch", where the workload's own overrides are separated by ';'
/// (they would otherwise split the list of cases): "fcn5:features=64;width=32:16".
struct BenchCase {
  std::string workload;
  int64_t batch = 0;
};
inline BenchCase parse_case(const std::string& item) {
  const size_t colon = item.rfind(':');
  BenchCase c{item.substr(0, colon), std::stoll(item.substr(colon + 1))};
  for (char& ch : c.workload) {
    if (ch == ';') ch = ',';
  }
  return c;
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
