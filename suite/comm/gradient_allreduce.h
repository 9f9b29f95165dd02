// How gradients cross ranks: one in-place MPI_Allreduce (sum) of the flat gradient buffer,
// then a scale by 1/P. Shared by the training step and the all-reduce microbenchmark, so that the
// microbenchmark measures exactly what training does.
#pragma once

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "drivers/driver.h"

namespace dlscale {

/// Sums `count` floats in place over `comm` (in chunks of at most INT_MAX elements, MPI's limit).
void allreduce_sum_in_place(float* data, size_t count, MPI_Comm comm);

/// Sums the gradient buffer over `comm` in place, then scales it by 1/P. No-op on one rank.
void allreduce_gradients(const GradBuffer& grads, MPI_Comm comm);

/// The gradient buffer cut into buckets of about `bucket_mb` MB, each reduced with its own
/// MPI_Iallreduce as soon as it and every bucket after it are final. A driver that reports
/// finished gradient ranges during backward (Model::set_gradient_ready_callback) so overlaps the
/// reduction with the rest of the backward pass; otherwise every bucket starts when backward
/// returns. Buckets start strictly from the last to the first, so that every rank starts the same
/// collectives in the same order, whatever order its model reports them in and also when its
/// backward failed half-way.
///
/// Progress: Open MPI advances a non-blocking collective only inside MPI calls, so a bucket
/// started during backward would mostly wait for finish(). Where MPI provides at least
/// MPI_THREAD_SERIALIZED, a communication thread owned by this object starts the buckets and
/// polls them while the compute threads run backward; between start_step() and the end of
/// finish() it is the only thread that calls MPI, which is all SERIALIZED asks. It is one extra
/// thread per rank, not taken from the case's compute threads, and yields the core whenever a
/// poll finds nothing done. Below SERIALIZED, ready() starts buckets itself and gives MPI one
/// MPI_Testall per report (progress_thread() is false).
class BucketedAllreduce {
 public:
  BucketedAllreduce(const GradBuffer& grads, MPI_Comm comm, double bucket_mb);
  BucketedAllreduce(const BucketedAllreduce&) = delete;
  BucketedAllreduce& operator=(const BucketedAllreduce&) = delete;
  ~BucketedAllreduce();

  /// Starts buckets from `model`'s reports of finished gradients (set_gradient_ready_callback,
  /// wired to ready()); returns whether the model reports them, false when its buckets can only
  /// start in finish(). `model` must be the one whose grad_buffer() this reduces.
  bool follow(Model& model);
  /// Before each backward pass: every bucket waits for its gradients again.
  void start_step();
  /// Elements [first, first + count) of the buffer hold their final values for this step.
  void ready(size_t first, size_t count);
  /// After backward: starts the buckets still waiting, completes all, scales by 1/P. Throws
  /// when an MPI call failed (in either thread).
  void finish();
  size_t bucket_count() const { return buckets_.size(); }
  /// Seconds from start_step() to the start of each bucket's reduction this step, by bucket
  /// (buffer order): when its gradients, and those of every bucket after it, were final; for a
  /// model that reports no finished gradients, when backward returned. What a simulation of the
  /// step (dlscale-project) takes as each bucket's readiness.
  const std::vector<double>& start_times() const { return started_s_; }
  bool progress_thread() const { return thread_.joinable(); }

 private:
  struct Bucket {
    size_t first = 0, count = 0, pending = 0;  ///< pending: elements not reported final this step
  };
  /// Hands bucket `index` over: to the communication thread, else straight to MPI.
  void start(size_t index);
  void communicate();  ///< the communication thread's loop

  float* data_;
  MPI_Comm comm_;
  int size_ = 1;
  std::vector<Bucket> buckets_;
  std::vector<MPI_Request> requests_;  // one per bucket; MPI_REQUEST_NULL when idle or complete
  size_t bucket_elems_ = 1;
  size_t next_ = 0;  ///< buckets [0, next_) not started this step
  std::chrono::steady_clock::time_point step_start_;
  std::vector<double> started_s_;  ///< per bucket, this step (start_times)

  // Shared with the communication thread, under mutex_.
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<size_t> to_start_;  ///< buckets ready for MPI_Iallreduce, in readiness order
  size_t completed_ = 0;          ///< buckets of this step whose reduction completed
  bool stop_ = false;
  std::string error_;  ///< the communication thread's failure, rethrown by finish()
  std::thread thread_;
};

}  // namespace dlscale
