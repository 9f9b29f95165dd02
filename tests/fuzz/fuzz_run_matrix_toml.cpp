// The run-matrix TOML (`dlscale run --config FILE`, the built-in suites): whatever the text,
// parsing, expanding and checking it ends in the cases or in one UsageError naming the problem.
// A case's command line (what dlscale prints to run it again, and its key for --resume), split as
// a shell splits it, comes back as the same case.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "suite/cli/command_line.h"
#include "suite/cli/commands.h"
#include "suite/errors.h"
#include "suite/matrix/run_matrix.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using dlscale::fuzz::drivers;
using dlscale::fuzz::kWorldSize;

/// The words a POSIX shell makes of `command` as CaseSpec::command() writes it: separated by
/// spaces, quoted in single quotes ('\'' for a quote).
std::vector<std::string> shell_words(const std::string& command) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false, quoted = false;
  for (size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if (quoted) {
      if (c == '\'') {
        quoted = false;
      } else {
        word += c;
      }
    } else if (c == '\'') {
      quoted = in_word = true;
    } else if (c == '\\' && i + 1 < command.size()) {
      word += command[++i];
      in_word = true;
    } else if (c == ' ') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

/// `command` run back through the command line: the same one case.
void check_reruns(const std::string& command) {
  const std::vector<std::string> words = shell_words(command);
  std::vector<const char*> argv;
  for (const std::string& w : words) argv.push_back(w.c_str());
  const dlscale::ParsedCommandLine parsed = dlscale::parse_command_line(static_cast<int>(argv.size()), argv.data());
  std::string suite;
  std::vector<dlscale::CaseSpec> again;
  try {
    if (!parsed.command) throw dlscale::UsageError(parsed.error);
    again = dlscale::requested_cases(parsed.command->run, drivers(), kWorldSize, suite);
    dlscale::fuzz::resolve(again);
  } catch (const dlscale::UsageError& e) {
    std::fprintf(stderr, "a case's own command line is refused: %s\n  %s\n", command.c_str(), e.what());
    std::abort();
  }
  if (again.size() != 1 || again[0].command() != command) {
    std::fprintf(stderr, "a case's command line does not run that case again:\n  %s\n  -> %zu case(s), first %s\n",
                 command.c_str(), again.size(), again.empty() ? "none" : again[0].command().c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<dlscale::CaseSpec> cases;
  try {
    cases = dlscale::expand(dlscale::parse_matrix_toml(text, "fuzz.toml"), kWorldSize);
    dlscale::assign_defaults(cases, drivers());
    dlscale::validate_request(cases, drivers(), kWorldSize);
    dlscale::fuzz::resolve(cases);
  } catch (const dlscale::UsageError&) {
    return 0;
  }
  (void)dlscale::cases_to_toml(cases);  // the provenance a run records
  if (!cases.empty()) check_reruns(cases.front().command());
  return 0;
}
