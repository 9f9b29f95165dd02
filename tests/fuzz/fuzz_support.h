// What the fuzz targets share: the drivers and the job that requests are checked for, a scratch
// folder for the files a reader takes by path, and telling a crash of the HDF5 library itself
// from dlscale's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/driver.h"
#include "suite/matrix/run_matrix.h"

namespace dlscale::fuzz {

/// The ranks of the job the requests are checked for, on one host.
constexpr int kWorldSize = 4;

/// The drivers this build has (and those it lacks, as dlscale registers them).
const Registry& drivers();

/// `cases` (expanded, defaults assigned, validated) resolved as `dlscale run` resolves them before
/// anything runs: their workloads made and their ranks placed; throws UsageError as it does.
void resolve(const std::vector<CaseSpec>& cases);

/// A folder of this process's own (under TMPDIR, else /tmp), made once and emptied at exit; or
/// the folder DLSCALE_FUZZ_SCRATCH names, which is kept.
const std::string& scratch_dir();

/// Writes `size` bytes at `data` to scratch_dir()/`name` (folders made as needed); returns its path.
std::string write_scratch(const std::string& name, const uint8_t* data, size_t size);
std::string write_scratch(const std::string& name, std::string_view text);

/// After each input of a target that reads HDF5: aborts (a finding) when any HDF5 object is still
/// open (a reader must close every file, group, dataset, attribute and type it opened, on every
/// path), then shuts the library down (H5close), so that the next input meets HDF5 as a new
/// dlscale process does, without the free lists and caches an earlier damaged file left.
void finish_hdf5_input();

/// The exit status of a target whose HDF5 library crashed (contain_hdf5_crashes).
constexpr int kHdf5Crashed = 86;

/// For the targets whose reads go through the HDF5 library, which itself crashes on some damaged
/// files (dlscale-report contains that in a child process; docs/fuzzing.md): from here on, a
/// crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL) whose faulting instruction lies in libhdf5, or an
/// AddressSanitizer report of an access from libhdf5 into a block libhdf5 allocated, ends this
/// process with one line and kHdf5Crashed, and scripts/fuzz.sh starts the target again. Any other
/// crash or report goes to the sanitizer, as before: a finding. Call from LLVMFuzzerInitialize, before
/// libFuzzer installs its handlers (it keeps these).
void contain_hdf5_crashes();

}  // namespace dlscale::fuzz
