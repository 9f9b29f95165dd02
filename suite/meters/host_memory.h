// Per-case peak resident memory of this process, from Linux's VmHWM. The high-water mark is
// reset at the start of each case (/proc/self/clear_refs), so a case does not inherit the peak
// of the case before it.
#pragma once

#include <cstdint>

namespace dlscale {

/// Resets the peak-RSS mark; false when the kernel does not allow it (then the peak recorded
/// is the process's lifetime peak).
bool reset_peak_rss();

/// Peak resident set size in bytes since the last reset (or process start); -1 if unknown.
int64_t peak_rss_bytes();

}  // namespace dlscale
