// How to reduce a gradient in buckets: the MPI calls dlscale could use, timed on the same buffer
// in one job, alternating call by call, communication only (no backward to overlap with). Each
// mechanism reduces --grad-mb MB of floats in buckets of about --bucket-mb MB, cut as dlscale
// cuts a buffer whose layers it does not know (cut_buckets, drivers/gradient_buckets.h: growing
// from 1 MB at either end), the buckets in the order training finishes them (the last first):
//
//   iallreduce-in-place    MPI_Iallreduce(MPI_IN_PLACE) per bucket, all started, then MPI_Waitall
//   iallreduce-separate    the same with a separate receive buffer
//   allreduce-per-bucket   one blocking MPI_Allreduce(MPI_IN_PLACE) per bucket, in order (what a
//                          communication thread runs, as Horovod's and PyTorch's MPI backends do)
//   allreduce-whole        one blocking MPI_Allreduce of the whole buffer (the yardstick)
//   dlscale-per-bucket     what dlscale's communication thread runs per bucket:
//                          allreduce_sum_in_place (suite/comm/ring_allreduce.h), its own ring
//
// Open MPI 4.1's non-blocking collectives (coll/libnbc) reduce an in-place buffer, and any buffer
// on fewer than 4 ranks, with a binomial tree and a broadcast: each bucket crosses the links
// twice; its blocking collectives (coll/tuned) choose recursive doubling, a ring or Rabenseifner's
// algorithm by size and P. The table gives each mechanism's median (slowest rank) and its ratio
// to allreduce-whole.
//
//   mpirun -np 2 build/current/bench/bench_allreduce_mechanisms [--grad-mb 102] [--bucket-mb 25,5]
//       [--iterations 5] [--warmup 1]
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "drivers/gradient_buckets.h"
#include "suite/comm/mpi_context.h"
#include "suite/comm/ring_allreduce.h"
#include "suite/meters/statistics.h"

namespace {

using Bucket = dlscale::BucketRange;

std::vector<Bucket> buckets_of(size_t elems, double bucket_mb) {
  std::vector<Bucket> b = dlscale::cut_buckets(elems, dlscale::bucket_elements_for(bucket_mb));
  std::reverse(b.begin(), b.end());  // training finishes the last bucket first
  return b;
}

void iallreduce(std::vector<float>& data, std::vector<float>* separate, const std::vector<Bucket>& buckets,
                MPI_Comm comm) {
  std::vector<MPI_Request> requests(buckets.size(), MPI_REQUEST_NULL);
  for (size_t i = 0; i < buckets.size(); ++i) {
    const Bucket& b = buckets[i];
    if (separate != nullptr) {
      MPI_Iallreduce(data.data() + b.first, separate->data() + b.first, static_cast<int>(b.count), MPI_FLOAT, MPI_SUM,
                     comm, &requests[i]);
    } else {
      MPI_Iallreduce(MPI_IN_PLACE, data.data() + b.first, static_cast<int>(b.count), MPI_FLOAT, MPI_SUM, comm,
                     &requests[i]);
    }
  }
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
}

void allreduce_each(std::vector<float>& data, const std::vector<Bucket>& buckets, MPI_Comm comm) {
  for (const Bucket& b : buckets) {
    MPI_Allreduce(MPI_IN_PLACE, data.data() + b.first, static_cast<int>(b.count), MPI_FLOAT, MPI_SUM, comm);
  }
}

void dlscale_each(std::vector<float>& data, const std::vector<Bucket>& buckets, MPI_Comm comm) {
  for (const Bucket& b : buckets)
    dlscale::allreduce_sum_in_place(data.data() + b.first, b.count, dlscale::GradCompression::kNone, comm);
}

}  // namespace

int main(int argc, char** argv) {
  dlscale::MpiSession session(&argc, &argv);
  dlscale::MpiContext mpi(MPI_COMM_WORLD);
  CLI::App app{"Bucketed gradient all-reduce: MPI mechanisms against one blocking all-reduce"};
  double grad_mb = 102.2;  // ResNet-50's 25.6 M parameters
  std::vector<double> bucket_mbs = {25, 5};
  int iterations = 5, warmup = 1;
  app.add_option("--grad-mb", grad_mb, "gradient size, MB")->capture_default_str();
  app.add_option("--bucket-mb", bucket_mbs, "bucket sizes, MB")->delimiter(',')->capture_default_str();
  app.add_option("--iterations", iterations)->capture_default_str();
  app.add_option("--warmup", warmup)->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const size_t elems = static_cast<size_t>(grad_mb * 1e6 / 4);
  std::vector<float> data(elems, 1.0f), separate(elems, 0.0f);
  MPI_Comm comm = MPI_COMM_WORLD;
  struct Mechanism {
    std::string name;
    double bucket_mb;
    std::function<void()> run;
    std::vector<double> times;
  };
  std::vector<Mechanism> mechanisms;
  const std::vector<Bucket> whole = {{0, elems}};
  mechanisms.push_back({"allreduce-whole", grad_mb, [&] { allreduce_each(data, whole, comm); }, {}});
  for (double mb : bucket_mbs) {
    const std::vector<Bucket> b = buckets_of(elems, mb);
    mechanisms.push_back({"iallreduce-in-place", mb, [&data, b, comm] { iallreduce(data, nullptr, b, comm); }, {}});
    mechanisms.push_back(
        {"iallreduce-separate", mb, [&data, &separate, b, comm] { iallreduce(data, &separate, b, comm); }, {}});
    mechanisms.push_back({"allreduce-per-bucket", mb, [&data, b, comm] { allreduce_each(data, b, comm); }, {}});
    mechanisms.push_back({"dlscale-per-bucket", mb, [&data, b, comm] { dlscale_each(data, b, comm); }, {}});
  }
  for (int it = 0; it < warmup + iterations; ++it) {
    for (Mechanism& m : mechanisms) {
      std::fill(data.begin(), data.end(), 1.0f);  // sums of P ones stay exact
      MPI_Barrier(comm);
      const auto t0 = std::chrono::steady_clock::now();
      m.run();
      double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), slowest = 0;
      MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
      if (it >= warmup) m.times.push_back(slowest);
    }
  }
  if (mpi.rank() == 0) {
    const double base = dlscale::median(mechanisms.front().times);
    fmt::print("{} ranks, {:.1f} MB of gradients, medians of {} (slowest rank)\n", mpi.size(), grad_mb, iterations);
    fmt::print("{:<22} {:>9} {:>10} {:>14}\n", "mechanism", "bucket MB", "median s", "/ whole");
    for (const Mechanism& m : mechanisms) {
      const double t = dlscale::median(m.times);
      fmt::print("{:<22} {:>9.1f} {:>10.3f} {:>14.2f}\n", m.name, m.bucket_mb, t, t / base);
    }
  }
  return 0;
}
