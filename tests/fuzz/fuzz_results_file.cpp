// The results files dlscale reads back: `run --resume` (its lock, completeness, schema, world
// size and finished cases) and `run --peak FILE` (its last /peak group). Whatever the bytes, each
// ends in what it read or in one UsageError naming the file and the problem. The HDF5 library
// itself crashes or loops on some damaged files: dlscale's ReadGuard ends a loop (set to 0.25 s
// here) with its one line and exit 2, and a crash inside libhdf5 is told from dlscale's
// (fuzz_support.h); scripts/fuzz.sh starts the target again after either.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "io/results_file.h"
#include "suite/errors.h"
#include "suite/record/peak_fields.h"
#include "suite/record/results_access.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("DLSCALE_READ_STALL_S", "0.25", 1);
  dlscale::fuzz::contain_hdf5_crashes();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = dlscale::fuzz::write_scratch("results.h5", data, size);
  try {
    const dlscale::ResultsFile file = dlscale::open_results(path, false, true, false, 1);
    (void)dlscale::finished_case_keys(file);
  } catch (const dlscale::UsageError&) {
  }
  try {
    std::string where;
    (void)dlscale::read_peak_file(path, &where);
  } catch (const dlscale::UsageError&) {
  }
  dlscale::fuzz::finish_hdf5_input();
  return 0;
}
