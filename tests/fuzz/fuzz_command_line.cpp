// `dlscale`'s command line: the input's NUL-separated words after "dlscale". Whatever they are,
// parsing and checking them (the run's cases resolved and checked as `run` does before anything
// runs) ends in a command, in --help's or --version's text, or in one line refusing them.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "suite/cli/command_line.h"
#include "suite/cli/commands.h"
#include "suite/cli/lifecycle.h"
#include "suite/errors.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> words{"dlscale"};
  std::string word;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      words.push_back(word);
      word.clear();
    } else {
      word += static_cast<char>(data[i]);
    }
  }
  if (!word.empty()) words.push_back(word);
  std::vector<const char*> argv;
  for (const std::string& w : words) argv.push_back(w.c_str());
  const dlscale::ParsedCommandLine parsed = dlscale::parse_command_line(static_cast<int>(argv.size()), argv.data());
  if (!parsed.error.empty()) {
    // One line as printed, whatever the words held (a newline quoted in the message).
    if (dlscale::one_line(parsed.error).find('\n') != std::string::npos) {
      std::fprintf(stderr, "a refusal of more than one line: %s\n", parsed.error.c_str());
      std::abort();
    }
    return 0;
  }
  if (!parsed.command && parsed.print.empty()) {
    std::fprintf(stderr, "neither a command, nor text to print, nor a refusal\n");
    std::abort();
  }
  if (!parsed.command || parsed.command->subcommand != dlscale::Subcommand::kRun) return 0;
  try {
    std::string suite;
    dlscale::fuzz::resolve(
        dlscale::requested_cases(parsed.command->run, dlscale::fuzz::drivers(), dlscale::fuzz::kWorldSize, suite));
  } catch (const dlscale::UsageError&) {
  }
  return 0;
}
