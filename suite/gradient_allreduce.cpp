#include "suite/gradient_allreduce.h"

#include <algorithm>
#include <climits>
#include <stdexcept>

#include "suite/errors.h"

namespace dlscale {

void allreduce_sum_in_place(float* data, size_t count, MPI_Comm comm) {
  for (size_t done = 0; done < count;) {
    const size_t n = std::min<size_t>(count - done, INT_MAX);
    DLSCALE_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, data + done, static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm));
    done += n;
  }
}

void allreduce_gradients(const GradBuffer& grads, MPI_Comm comm) {
  int size = 1;
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &size));
  if (size == 1) return;
  if (grads.on_device) {
    throw std::runtime_error("gradients live on a GPU: the MPI all-reduce needs host memory (GPU drivers use NCCL)");
  }
  allreduce_sum_in_place(grads.data, grads.count, comm);
  const float scale = 1.0f / static_cast<float>(size);
  float* g = grads.data;
  const auto n = static_cast<int64_t>(grads.count);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) g[i] *= scale;
}

}  // namespace dlscale
