#include "suite/cli/lifecycle.h"

#include <cstdio>
#include <exception>

#include <fmt/format.h>

#include "suite/errors.h"
#include "suite/record/results_access.h"

namespace dlscale {

std::string one_line(const std::string& text) {
  std::string line;
  line.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      line += "\\n";
    } else if (c == '\r') {
      line += "\\r";
    } else if (c == '\t') {
      line += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      line += fmt::format("\\x{:02x}", c);
    } else {
      line += ch;
    }
  }
  return line;
}

bool report_usage_error(MPI_Comm comm, const std::string& message) {
  int rank = 0, size = 1;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &size));
  const int mine = message.empty() ? size : rank;
  int first = size;
  DLSCALE_CHECK_MPI(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == size) return false;
  if (rank == first) {
    fmt::print(stderr, "dlscale: error: {}\n", one_line(message));
    std::fflush(stderr);
  }
  return true;
}

bool usage_refused(MPI_Comm comm, const std::function<void()>& check) {
  std::string problem;
  try {
    check();
  } catch (const UsageError& e) {
    problem = e.what();
  }
  return report_usage_error(comm, problem);
}

bool write_failed(MPI_Comm comm, const std::string& error, const std::string& path, const std::string& resume_hint) {
  if (allreduce_max(comm, error.empty() ? 0 : 1) == 0) return false;
  if (!error.empty()) {
    fmt::print(stderr,
               "dlscale: error: the results file could not be written ({}); {} is as it was before, with every case "
               "finished before. Make room (or repair the file system), then, under the same launcher: {}\n",
               error, path, resume_hint);
    std::fflush(stderr);
  }
  return true;
}

bool written_by_rank0(MPI_Comm comm, const std::string& path, const std::string& resume_hint,
                      const std::function<void()>& write) {
  int rank = 0;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  std::string error;
  if (rank == 0) {
    try {
      write();
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  return !write_failed(comm, error, path, resume_hint);
}

bool commit_measurement(const MpiContext& mpi, ResultsFile* file, StopDeadline& deadline,
                        const std::vector<RankInfo>& table, const Registry& drivers, const Recording& recording,
                        const std::function<void(ResultsFile::Update&, int64_t run)>& add) {
  return written_by_rank0(mpi.world(), recording.out_path, recording.command_line, [&] {
    const auto writing = deadline.hold_off();
    ResultsFile::Update update = file->update();
    const int64_t run =
        write_provenance(update, table, drivers, mpi.size(), recording.command_line, "", recording.resume);
    add(update, run);
    update.commit();
  });
}

}  // namespace dlscale
