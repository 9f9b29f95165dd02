// The exit codes of dlscale, the same on every rank (docs/running.md, "Exit codes", holds the
// one table users read; keep the two together).
#pragma once

namespace dlscale {

enum class ExitCode : int {
  kOk = 0,           ///< every case ran; unsupported, oom and timeout cases do not change it
  kCaseFailed = 1,   ///< at least one case ended with status error
  kUsage = 2,        ///< bad input, found on every rank before any benchmark work
  kStopped = 3,      ///< a stop signal (SIGTERM, SIGINT) ended the run; finished cases are in the file
  kStuck = 4,        ///< a case hung past its --case-timeout where MPI cannot interrupt it (watchdog)
  kWriteFailed = 5,  ///< the results file could not be written; it is as it was before
  kFatal = 6,        ///< a failure outside any case (MPI itself, the process) took the job down
};

/// The process exit code of `c`.
constexpr int exit_code(ExitCode c) { return static_cast<int>(c); }

}  // namespace dlscale
