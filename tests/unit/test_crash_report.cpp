// The crash report's line (suite/process/crash_report.h), from real faults in a child process
// (GoogleTest's death tests): what crashed, where, and where a call through a null pointer came
// from, in the form addr2line takes; and no line, but dlscale's own exit status, once dlscale has
// reported a failure of its own.
#include <gtest/gtest.h>

#include "suite/process/crash_report.h"

namespace dlscale {
namespace {

using Function = void (*)();

// Through a volatile pointer: the compiler may not drop a call or a store it can prove faults.
void call(Function volatile function) { function(); }
void store_at(int* volatile where) { *where = 1; }

constexpr const char* kHint = "Every finished case is in f.h5; to run the rest: dlscale run --out f.h5 --resume";

TEST(CrashReport, ACallThroughANullPointerNamesWhereItWasCalledFrom) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        install_crash_report();
        set_crash_context(3, "node7", "case dlscale run -w fcn5", kHint);
        call(nullptr);
      },
      "dlscale: rank 3 \\(node7\\): crashed: SIGSEGV at address 0x0, instruction 0x0, called from "
      "0x[0-9a-f]+ in [^ ]*dlscale_unit_tests at offset 0x[0-9a-f]+ during case dlscale run -w fcn5\\. "
      "Every finished case is in f\\.h5; to run the rest: dlscale run --out f\\.h5 --resume");
}

TEST(CrashReport, ABadStoreNamesTheAddressAndTheInstruction) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        install_crash_report();
        set_crash_context(0, "login1", "set-up", "");
        store_at(reinterpret_cast<int*>(16));
      },
      "dlscale: rank 0 \\(login1\\): crashed: SIGSEGV at address 0x10, instruction 0x[0-9a-f]+ in "
      "[^ ]*dlscale_unit_tests at offset 0x[0-9a-f]+ during set-up\\.\n");
}

TEST(CrashReport, BeforeAnyContextTheLineStillNamesTheSignal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        install_crash_report();
        std::abort();
      },
      "dlscale: crashed: SIGABRT\n");
}

TEST(CrashReport, AfterAFailureOfItsOwnACrashEndsTheProcessWithItsStatusAndNoLine) {
  // dlscale has printed its line about a full disk and returns 5; HDF5 then crashes closing the
  // file in MPI_Finalize: the status stays 5 and nothing is added to the line.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        install_crash_report();
        set_crash_context(0, "login1", "set-up", "");
        end_crashes_with(5);
        store_at(reinterpret_cast<int*>(16));
      },
      ::testing::ExitedWithCode(5), "^$");
}

}  // namespace
}  // namespace dlscale
