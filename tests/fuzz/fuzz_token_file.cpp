// Token files (`--data tokens:FILE.h5`, io/token_file.h): HDF5, read as the results files are
// (fuzz_results_file.cpp says how the HDF5 library's own crashes and loops are told apart).
#include <cstdint>
#include <cstdlib>

#include "tests/fuzz/fuzz_datasets.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("DLSCALE_READ_STALL_S", "0.25", 1);
  dlscale::fuzz::contain_hdf5_crashes();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dlscale::fuzz::read_dataset("tokens:" + dlscale::fuzz::write_scratch("tokens.h5", data, size));
  dlscale::fuzz::finish_hdf5_input();
  return 0;
}
