// `dlscale`'s command line (CLI11): the subcommands, their options and every check of what was
// typed that needs neither MPI nor the drivers. main() runs what it returns; the fuzz tests feed
// it machine-made command lines.
#pragma once

#include <optional>
#include <string>

#include "suite/cli/commands.h"

namespace dlscale {

enum class Subcommand { kRun, kAllreduce, kPeak, kList, kInfo };

/// A checked command line.
struct CommandLine {
  Subcommand subcommand = Subcommand::kRun;
  RunArgs run;
  AllreduceArgs allreduce;
  PeakArgs peak;
  std::string list_json;  ///< `list --json WORKLOAD`
};

/// What argv comes to: the command to run, or text to print before exiting with 0 (--help,
/// --version), or the one line that refuses it.
struct ParsedCommandLine {
  std::optional<CommandLine> command;
  std::string print;  ///< without a command and an error: --help's or --version's text
  std::string error;  ///< why the command line is refused ("" when it is not)
};

ParsedCommandLine parse_command_line(int argc, const char* const* argv);

}  // namespace dlscale
