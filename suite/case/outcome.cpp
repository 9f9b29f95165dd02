#include "suite/case/outcome.h"

#include <new>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "suite/comm/mpi_context.h"
#include "suite/errors.h"

namespace dlscale {

Outcome agree(MPI_Comm comm, const Outcome& mine) {
  const auto worst = static_cast<Status>(allreduce_max(comm, static_cast<int>(mine.status)));
  if (worst == Status::kOk) return {};
  const std::vector<std::string> all = gather_strings(comm, mine.status == worst ? mine.message : std::string());
  std::string agreed;
  for (size_t r = 0; r < all.size(); ++r) {
    if (!all[r].empty()) {
      agreed = all.size() > 1 ? fmt::format("rank {}: {}", r, all[r]) : all[r];
      break;
    }
  }
  return {worst, agreed};
}

Outcome outcome_of(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const MpiError&) {
    throw;
  } catch (const OutOfMemory& e) {
    return {Status::kOom, e.what()};
  } catch (const Timeout& e) {
    return {Status::kTimeout, e.what()};
  } catch (const std::bad_alloc&) {
    return {Status::kOom, "host allocation failed (std::bad_alloc)"};
  } catch (const std::exception& e) {
    return {Status::kError, e.what()};
  } catch (...) {
    return {Status::kError, "an exception that is not a std::exception"};
  }
}

}  // namespace dlscale
