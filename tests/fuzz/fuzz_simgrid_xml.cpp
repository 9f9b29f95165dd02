// dlscale-project's SimGrid platforms (--platform FILE.xml): whatever the file holds, loading it
// ends in a cluster description or in one std::invalid_argument naming the problem. SimGrid's
// own parser runs in a child there (project/isolated_run.h), which this exercises too.
#include <cstdint>
#include <stdexcept>

#include "project/platform.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = dlscale::fuzz::write_scratch("platform.xml", data, size);
  try {
    (void)dlscale::project::load_simgrid_platform_file(path);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
