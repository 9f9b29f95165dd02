// A damaged results file can make the HDF5 library loop for ever inside one call (HDF5 1.10 on a
// corrupted global heap, where the file's strings live): the call neither returns nor fails, and
// nothing interrupts it. A ReadGuard watches from a thread of its own for HDF5 calls to return
// (every DLSCALE_CHECK_H5 notes one); when none has for its limit while it lives, it prints one
// line naming the file and ends the process with exit code 2, as bad input does.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace dlscale {

/// The seconds without progress a ReadGuard allows: DLSCALE_READ_STALL_S, else 120 (reading a
/// case takes milliseconds). Throws std::invalid_argument naming a value that is not a number
/// of seconds > 0.
double read_stall_seconds();

class ReadGuard {
 public:
  /// `subject` begins the line it prints, e.g. "dlscale: error: --resume: results/study.h5".
  ReadGuard(std::string subject, double seconds);
  ~ReadGuard();
  ReadGuard(const ReadGuard&) = delete;
  ReadGuard& operator=(const ReadGuard&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable stopped_;
  bool done_ = false;
  std::thread thread_;  // last: it starts once the members above exist
};

}  // namespace dlscale
