// How gradients cross ranks on CPUs: the flat gradient buffer summed in place over MPI
// (allreduce_sum_in_place: dlscale's ring, MPI_Allreduce for small buffers), whole after backward
// or in buckets during it, then scaled by 1/P. The all-reduce microbenchmark times the same sum
// of float32, so that it measures what training sends. With --grad-compression each bucket is
// scaled by 1/P first, rounded to fp16 or bf16 (drivers/gradient_compression.h) and summed in that
// format, half the bytes, then widened back into the buffer, as DDP's compression hooks do.
#pragma once

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "drivers/driver.h"
#include "drivers/gradient_buckets.h"
#include "drivers/gradient_compression.h"
#include "suite/comm/ring_allreduce.h"
#include "suite/comm/sparse_rows.h"

namespace dlscale {

/// How the harness's MPI all-reduce sends the gradients: in what format (GradCompression) and
/// through which hierarchy (Hierarchy: resolved, kFlat or kHost).
struct MpiReduction {
  GradCompression compression = GradCompression::kNone;
  Hierarchy hierarchy = Hierarchy::kFlat;
  /// --sparse-embedding: the buffer's first sparse_rows x sparse_width floats (an embedding's
  /// gradient) are summed by the buckets as the rows the ranks touched (SparseRowsSum), in fp32;
  /// 0: no such block. The one all-reduce after backward sends it dense.
  size_t sparse_rows = 0, sparse_width = 0;
  /// Sharding::kOptimizer: the buckets are reduce-scattered (BucketedAllreduce::shard()), flat.
  Sharding sharding = Sharding::kNone;
};

/// What a step's gradient average adds to the last micro-batch's gradients in the buffer and
/// measures on the way: the earlier micro-batches' summed gradients (gradient accumulation, added
/// before the sum over ranks, so that the ranks sum once per step), and the two squared norms the
/// gradient noise scale is estimated from (suite/meters/noise_scale.h), read as the average passes
/// over the gradients anyway.
struct StepGradients {
  const float* earlier = nullptr;  ///< the earlier micro-batches' summed gradients; nullptr: none
  int micro_batches = 1;           ///< the average divides the sum by ranks x micro_batches
  double last_sq = 0;              ///< out: |g|² of the last micro-batch's own gradient on this rank
  double mean_sq = 0;              ///< out: |g|² of the average over ranks and micro-batches
};

/// Adds `step.earlier` to the gradient buffer, sums it over `comm` in place (not on one rank),
/// and divides it by P x micro_batches, measuring step's norms; compressed (`how`), divided first
/// and summed in 16 bits. One rank's one micro-batch is left as it is, and nothing is measured (a
/// single-rank step stays the network's alone).
void allreduce_gradients(const GradBuffer& grads, MPI_Comm comm, const MpiReduction& how, StepGradients& step);

/// The gradient buffer cut into buckets of about `bucket_mb` MB (cut_buckets), each summed
/// (RingSum: dlscale's ring, MPI_Allreduce under 128 KiB) as soon as it and every bucket after it
/// are final. A driver that reports finished gradient ranges during backward
/// (Model::set_gradient_ready_callback) so overlaps the reduction with the rest of the backward
/// pass. Buckets start strictly from the last to the first, so that every rank starts the same
/// sums in the same order, whatever order its model reports them in and also when its backward
/// failed half-way.
///
/// Where MPI provides at least MPI_THREAD_SERIALIZED, a communication thread owned by this object
/// sums the buckets while the compute threads run backward, as Horovod's and PyTorch's backends
/// do; between start_step() and the end of finish() it is the only thread that calls MPI, which is
/// all SERIALIZED asks. It is one extra thread per rank, not taken from the case's compute threads.
/// It keeps up to kRingLanes rings in flight, a bucket starting as soon as it is ready even while
/// the one before is still on its way, as PyTorch's gloo backend runs two all-reduces at once on
/// its two threads: when one ring waits on a rank whose thread is not running, the other keeps the
/// link busy. Not MPI_Iallreduce: Open MPI 4.1's non-blocking collectives reduce an in-place
/// buffer, and any buffer on fewer than 4 ranks, with a binomial tree and a broadcast, which
/// crosses the network twice (1.9x the blocking call's time between two hosts at 200 Mbit/s,
/// bench/allreduce_mechanisms.cpp). Below SERIALIZED there is no thread: finish() sums the
/// buckets, in the same order, one at a time after backward; nor for a single bucket, which has
/// nothing to overlap.
class BucketedAllreduce {
 public:
  /// `unit_starts`: where the ranges the model reports final together begin in the buffer (its
  /// layers'), which buckets do not cut (cut_buckets); empty: anywhere. `bucket_mb` 0: one bucket,
  /// the whole buffer (with the embedding's rows a bucket of their own), reduced after backward. `how`: the format the
  /// buckets are summed in and the hierarchy. A collective on more than one rank
  /// (ring_segment_bytes, host_groups).
  BucketedAllreduce(const GradBuffer& grads, MPI_Comm comm, double bucket_mb, const std::vector<size_t>& unit_starts,
                    const MpiReduction& how = {});
  BucketedAllreduce(const BucketedAllreduce&) = delete;
  BucketedAllreduce& operator=(const BucketedAllreduce&) = delete;
  ~BucketedAllreduce();

  /// Starts buckets from `model`'s reports of finished gradients (set_gradient_ready_callback,
  /// wired to ready()); returns whether the model reports them, false when its buckets can only
  /// start in finish(). `model` must be the one whose grad_buffer() this reduces.
  bool follow(Model& model);
  /// Before each step, at `step_start` (what start_times() and reduction_times() count from):
  /// every bucket waits for its gradients again; `step` (kept until finish()) says what the
  /// average adds to each bucket before its sum (StepGradients).
  void start_step(std::chrono::steady_clock::time_point step_start, StepGradients& step);
  /// While held (the micro-batches before a step's last), the model's reports of final
  /// gradients start nothing: the buffer holds one micro-batch's gradients, not the step's.
  void hold(bool held) { held_ = held; }
  /// Elements [first, first + count) of the buffer hold their final values for this step.
  void ready(size_t first, size_t count);
  /// After backward: reduces the buckets still waiting, waits for all, divides by P x the
  /// micro-batches and fills the step's norms. Throws when an MPI call failed (in either thread).
  void finish();
  /// After a step (the last of the warm-up), on every rank: merges the buckets that the network
  /// made wait anyway (merge_waiting: final, on every rank, before the group reduced just before
  /// them began), as measured in that step, for the steps that follow. Agreeing on those
  /// times is one MPI_Allreduce of two doubles per bucket: a collective. PyTorch DDP likewise
  /// rebuilds its buckets once, after its first step, from the order in which gradients became
  /// final there. Does nothing before a step has finished.
  void merge_waiting_buckets();
  size_t bucket_count() const { return buckets().size(); }
  /// The buckets (cut_buckets, then as merge_waiting_buckets() left them), in buffer order.
  const std::vector<BucketRange>& buckets() const { return schedule_.buckets(); }
  /// Seconds from start_step() to the start of each bucket's reduction this step, by bucket
  /// (buffer order): when its gradients, and those of every bucket after it, were final; for a
  /// model that reports no finished gradients, when backward returned. What a simulation of the
  /// step (dlscale-project) takes as each bucket's readiness.
  const std::vector<double>& start_times() const { return started_s_; }
  /// Seconds from start_step() to the start and to the end of each bucket's reduction this step,
  /// by bucket (buffer order; start, end pairs): from when the thread, or finish(), took it up
  /// until its sum was complete on this rank, waiting for the other ranks included. Read after
  /// finish().
  const std::vector<double>& reduction_times() const { return reduced_s_; }
  /// --sparse-embedding: whether the first bucket is the embedding's rows (MpiReduction), and of
  /// the last step, the rows the ranks sent over all ranks' rows (P x rows), and whether the
  /// block went round the ring instead (sparse_crossover_share). NaN and false before a step.
  bool sparse_embedding() const { return sparse_rows_ > 0; }
  double embedding_rows_share() const { return rows_share_; }
  bool embedding_went_dense() const { return went_dense_; }
  /// A communication thread reduces the buckets during backward (else finish() does, after it).
  bool progress_thread() const { return thread_.joinable(); }
  /// How many buckets may be in flight at once: kRingLanes on the thread, else 1.
  int lanes() const { return progress_thread() ? kRingLanes : 1; }
  /// For the record (docs/schema.md, allreduce_mechanism): "mpi_allreduce_buckets_thread";
  /// "mpi_allreduce" for a single bucket (one all-reduce after backward); else
  /// "mpi_allreduce_buckets_after_backward" (no communication thread); the same when sharded(),
  /// whose reduce-scatters the case's `sharding` names.
  std::string mechanism() const {
    if (progress_thread()) return "mpi_allreduce_buckets_thread";
    return buckets().size() <= 1 ? "mpi_allreduce" : "mpi_allreduce_buckets_after_backward";
  }
  /// --sharding optimizer on more than one rank: each bucket is reduce-scattered, and after
  /// finish() this rank's share of it (ring_owned_chunk of each bucket) alone holds the averaged
  /// gradient; the rest of the buffer holds partial sums. The buckets then stay as cut (no
  /// merge_waiting_buckets()): the optimiser's state lives where the cut put each share.
  bool sharded() const { return sharded_; }
  /// The parameters this rank updates (sharded; else the whole model): its share of every bucket.
  const ParameterShard& shard() const { return shard_; }
  /// After this rank updated shard() (or failed to; a collective either way): every rank's share
  /// of the parameters copied into every rank's model.parameters(), each bucket's by the ring's
  /// all-gather, then model.parameters_changed(). Nothing when not sharded.
  void gather_parameters(Model& model);

 private:
  /// The per-bucket times sized for buckets().
  void size_per_bucket();
  /// This rank's share of bucket `index`, from the buffer's start (sharded).
  ParamRange owned(size_t index) const;
  /// Bucket `index` is ready: queued for the communication thread, or for finish() without one.
  void start(size_t index);
  double since_step_start() const;  ///< seconds since start_step()'s time point
  void reduce(size_t index);        ///< sums it and waits (without the thread)
  /// Its reduction begins: the start time, its own gradients' norm, the earlier micro-batches
  /// added; compressed, the bucket divided and rounded into wire_. Returns what to sum.
  void* begin_reduction(size_t index);
  /// The sum of bucket `index`, starting on `lane`: the embedding's rows for the sparse bucket,
  /// else start_sum()'s.
  std::unique_ptr<InFlightSum> start_bucket(size_t index, void* data, int lane);
  /// Whether bucket `index` is the embedding's rows, summed sparse.
  bool sparse_bucket(size_t index) const { return sparse_rows_ > 0 && index == 0; }
  /// Its sum (`sum`) is complete on this rank: compressed, widened back into the buffer; the
  /// embedding's rows, their share; the end time.
  void end_reduction(size_t index, const InFlightSum& sum);
  /// A bucket being summed on the communication thread, on its ring lane.
  struct InFlight {
    size_t index;
    int lane;
    std::unique_ptr<InFlightSum> sum;
  };
  /// Starts the handed-over buckets that may start now (with `lock` of mutex_ held).
  void launch_ready(std::vector<InFlight>& in_flight, std::unique_lock<std::mutex>& lock);
  void communicate();  ///< the communication thread's loop

  float* data_;
  size_t count_;  ///< the buffer's
  MPI_Comm comm_;
  GradCompression compression_;
  Hierarchy hierarchy_;
  bool sharded_ = false;
  ParameterShard shard_;                       ///< sharded: this rank's share of each bucket
  size_t sparse_rows_ = 0, sparse_width_ = 0;  ///< the embedding's block (MpiReduction); 0: none
  double rows_share_ = std::numeric_limits<double>::quiet_NaN();
  bool went_dense_ = false;
  std::vector<uint16_t> wire_;  ///< compressed: the buffer in 16 bits, what the rings sum
  int size_ = 1;
  size_t rank_ = 0;
  BucketSchedule schedule_;  ///< buckets() and which of them may start
  bool stepped_ = false;     ///< a step has finished: its times are there to merge by
  std::chrono::steady_clock::time_point step_start_;
  std::vector<double> started_s_;  ///< per bucket, this step (start_times)
  std::vector<double> reduced_s_;  ///< per bucket, start and end, this step (reduction_times)
  bool held_ = false;
  StepGradients* step_ = nullptr;  ///< this step's (start_step to finish)
  std::vector<double> own_sq_;     ///< per bucket, |g|² of the last micro-batch's own gradients

  // Shared with the communication thread, under mutex_.
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<size_t> to_reduce_;  ///< buckets ready, in readiness order
  size_t completed_ = 0;          ///< buckets of this step whose reduction completed
  bool stop_ = false;
  std::string error_;  ///< the communication thread's failure, rethrown by finish()
  std::thread thread_;
};

}  // namespace dlscale
