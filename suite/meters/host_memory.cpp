#include "suite/meters/host_memory.h"

#include <fstream>
#include <string>

namespace dlscale {

bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";  // "5" resets the peak RSS (Documentation/filesystems/proc.rst)
  f.flush();
  return static_cast<bool>(f);
}

int64_t peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // reported in kB
  }
  return -1;
}

}  // namespace dlscale
