// A damaged results file can make the HDF5 library loop for ever inside one call (HDF5 1.10 on a
// corrupted global heap, where the file's strings live): the call neither returns nor fails, and
// nothing interrupts it. A ReadGuard is a Watchdog whose deadline moves with every HDF5 call that
// returns (io/hdf5_progress.h): when none has for its limit while it lives, it prints one line
// naming the file and ends the process with exit code 2, as bad input does.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "io/hdf5_progress.h"
#include "suite/errors.h"
#include "suite/process/watchdog.h"

namespace dlscale {

/// The seconds without progress a ReadGuard allows: DLSCALE_READ_STALL_S, else 120 (reading a
/// case takes milliseconds). Throws UsageError naming a value that is not a number of seconds > 0.
inline double read_stall_seconds() {
  const char* text = std::getenv("DLSCALE_READ_STALL_S");
  if (text == nullptr) return 120;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds > 0) || !std::isfinite(seconds)) {
    throw UsageError(std::string("DLSCALE_READ_STALL_S '") + text + "': not a number of seconds > 0");
  }
  return seconds;
}

class ReadGuard {
 public:
  /// `subject` begins the line it prints, e.g. "dlscale: error: --resume: results/study.h5".
  ReadGuard(const std::string& subject, double seconds)
      : watchdog_(
            // Idle since the last HDF5 call that returned, or since the guard began if that is later.
            [seconds, start = std::chrono::steady_clock::now()] {
              const double since_start =
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
              return seconds - std::min(h5::seconds_since_progress(), since_start);
            },
            [subject, seconds] {
              std::fprintf(stderr, "%s: the HDF5 library made no progress reading it for %g s: the file is damaged\n",
                           subject.c_str(), seconds);
              std::fflush(stderr);
              std::_Exit(2);
            }) {}

 private:
  Watchdog watchdog_;
};

}  // namespace dlscale
