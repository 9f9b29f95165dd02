// The wall-clock time results are stamped with (a case's start, a run's, a peak measurement's).
// Durations are never taken from it: they come from the monotonic clocks of the timers.
#pragma once

#include <string>

namespace dlscale {

/// Current time in UTC as "2026-11-22T03:04:05Z".
std::string utc_now();

}  // namespace dlscale
