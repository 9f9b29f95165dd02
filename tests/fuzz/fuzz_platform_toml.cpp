// dlscale-project's platform files (--platform FILE.toml): whatever the text, parsing it ends in
// a cluster description or in one std::invalid_argument naming the problem.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "project/platform.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const dlscale::project::ClusterDescription c = dlscale::project::parse_platform_toml(text, "fuzz.toml");
    for (int ranks : {1, 2, 7}) {
      try {
        (void)dlscale::project::place_rank(c, ranks, ranks - 1);
      } catch (const std::invalid_argument&) {  // more ranks than the platform has
      }
    }
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
