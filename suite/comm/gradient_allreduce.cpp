#include "suite/comm/gradient_allreduce.h"

#include <algorithm>
#include <memory>
#include <stdexcept>

#include <omp.h>

#include "suite/comm/wire_format.h"
#include "suite/errors.h"

namespace dlscale {

namespace {

/// |g|² of [data, data + count), then the earlier micro-batches' gradients added to it.
double own_norm_then_add(float* data, const float* earlier, size_t count) {
  const auto n = static_cast<int64_t>(count);
  double sq = 0;
#pragma omp parallel for schedule(static) reduction(+ : sq)
  for (int64_t i = 0; i < n; ++i) {
    sq += static_cast<double>(data[i]) * data[i];
    if (earlier != nullptr) data[i] += earlier[i];
  }
  return sq;
}

/// Scales [data, data + count) by `scale`; returns the squared norm of the result.
double scale_and_norm(float* data, size_t count, float scale) {
  const auto n = static_cast<int64_t>(count);
  double sq = 0;
#pragma omp parallel for schedule(static) reduction(+ : sq)
  for (int64_t i = 0; i < n; ++i) {
    data[i] *= scale;
    sq += static_cast<double>(data[i]) * data[i];
  }
  return sq;
}

}  // namespace

void allreduce_gradients(const GradBuffer& grads, MPI_Comm comm, const MpiReduction& how, StepGradients& step) {
  int size = 1;
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &size));
  if (grads.on_device) {
    throw std::runtime_error("gradients live on a GPU: the MPI all-reduce needs host memory (GPU drivers use NCCL)");
  }
  if (size == 1 && step.micro_batches == 1) return;  // one rank's one batch: nothing to average or add
  step.last_sq = own_norm_then_add(grads.data, step.earlier, grads.count);
  const float mean = 1.0f / static_cast<float>(size * step.micro_batches);
  if (size > 1 && how.compression != GradCompression::kNone) {
    std::vector<uint16_t> wire(grads.count);
    compress(grads.data, wire.data(), grads.count, mean, how.compression);
    allreduce_sum_in_place(wire.data(), wire.size(), how.compression, comm, how.hierarchy);
    widen(wire.data(), grads.data, grads.count, how.compression);
    step.mean_sq = scale_and_norm(grads.data, grads.count, 1.0f);
    return;
  }
  if (size > 1) allreduce_sum_in_place(grads.data, grads.count, GradCompression::kNone, comm, how.hierarchy);
  step.mean_sq = scale_and_norm(grads.data, grads.count, mean);
}

BucketedAllreduce::BucketedAllreduce(const GradBuffer& grads, MPI_Comm comm, double bucket_mb,
                                     const std::vector<size_t>& unit_starts, const MpiReduction& how)
    : data_(grads.data), count_(grads.count), comm_(comm), compression_(how.compression), hierarchy_(how.hierarchy) {
  if (grads.on_device) throw std::runtime_error("bucketed MPI all-reduce needs gradients in host memory");
  if (compression_ != GradCompression::kNone) wire_.resize(grads.count);
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &size_));
  sharded_ = how.sharding == Sharding::kOptimizer && size_ > 1;
  if (sharded_ && hierarchy_ != Hierarchy::kFlat) {
    throw std::logic_error("a sharded optimiser's gradients are reduce-scattered round one flat ring");
  }
  // No bucket size (a sharded optimiser's one reduce-scatter after backward): one bucket.
  const auto cut = [&](size_t elements, const std::vector<size_t>& units) {
    return bucket_mb > 0 ? cut_buckets(elements, bucket_elements_for(bucket_mb), units)
                         : std::vector<BucketRange>{{0, elements}};
  };
  if (bucket_mb > 0) {
    schedule_ = BucketSchedule(grads.count, bucket_mb, unit_starts);
  } else {
    schedule_.replace(cut(grads.count, unit_starts));
  }
  const size_t block = how.sparse_rows * how.sparse_width;
  if (size_ > 1 && block > 0 && block < grads.count) {
    // The embedding's rows are a bucket of their own, the first (reduced last: backward finishes
    // the first layer last); the rest is cut as before.
    sparse_rows_ = how.sparse_rows;
    sparse_width_ = how.sparse_width;
    std::vector<size_t> rest_units;
    for (size_t u : unit_starts) {
      if (u >= block) rest_units.push_back(u - block);
    }
    std::vector<BucketRange> buckets{{0, block}};
    for (const BucketRange& b : cut(grads.count - block, rest_units)) {
      buckets.push_back({b.first + block, b.count});
    }
    schedule_.replace(std::move(buckets));
  }
  size_per_bucket();
  if (sharded_) {
    int rank = 0;
    DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    rank_ = static_cast<size_t>(rank);
    shard_.whole = false;
    for (size_t i = 0; i < buckets().size(); ++i) {
      const ParamRange own = owned(i);
      if (own.count > 0) shard_.ranges.push_back(own);
    }
  }
  // The rings' segment size is agreed here, on every rank, rather than by the thread's first ring.
  if (size_ > 1) ring_segment_bytes(comm);
  if (size_ > 1 && hierarchy_ == Hierarchy::kHost) host_groups(comm);
  // One bucket has nothing to overlap: it is the one all-reduce after backward, without a thread
  // that would only share the cores backward runs on.
  int level = MPI_THREAD_SINGLE;
  DLSCALE_CHECK_MPI(MPI_Query_thread(&level));
  if (level >= MPI_THREAD_SERIALIZED && buckets().size() > 1) thread_ = std::thread([this] { communicate(); });
}

BucketedAllreduce::~BucketedAllreduce() {
  if (!thread_.joinable()) return;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();  // it reduces every bucket handed to it before it returns
}

void BucketedAllreduce::size_per_bucket() {
  started_s_.assign(buckets().size(), 0.0);
  reduced_s_.assign(2 * buckets().size(), 0.0);
}

ParamRange BucketedAllreduce::owned(size_t index) const {
  const BucketRange& b = buckets()[index];
  // The embedding's rows, summed whole on every rank, are shared out as a ring's would be.
  const ParamRange own = ring_owned_chunk(b.count, static_cast<size_t>(size_), rank_);
  return {b.first + own.first, own.count};
}

void BucketedAllreduce::merge_waiting_buckets() {
  if (!stepped_ || sharded_) return;
  const size_t n = buckets().size();
  std::vector<double> times(2 * n);  // when each was final, when its reduction began
  for (size_t i = 0; i < n; ++i) {
    times[i] = started_s_[i];
    times[n + i] = reduced_s_[2 * i];
  }
  DLSCALE_CHECK_MPI(
      MPI_Allreduce(MPI_IN_PLACE, times.data(), static_cast<int>(times.size()), MPI_DOUBLE, MPI_MAX, comm_));
  // Every rank merges from the same times: the same buckets everywhere.
  const std::vector<double> ready(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(n));
  const std::vector<double> began(times.begin() + static_cast<std::ptrdiff_t>(n), times.end());
  // Between steps the communication thread waits for work and reads no bucket. The embedding's
  // rows stay a bucket of their own.
  const size_t skip = sparse_rows_ > 0 ? 1 : 0;
  const auto from = [&](const auto& v) { return std::vector(v.begin() + static_cast<std::ptrdiff_t>(skip), v.end()); };
  std::vector<BucketRange> merged =
      merge_waiting(from(buckets()), from(ready), from(began), schedule_.bucket_elements());
  if (skip > 0) merged.insert(merged.begin(), buckets().front());
  schedule_.replace(std::move(merged));
  size_per_bucket();
}

bool BucketedAllreduce::follow(Model& model) {
  // The reports feed start_times() either way; they overlap the reduction only with the thread.
  const bool reports = model.set_gradient_ready_callback([this](size_t first, size_t count) { ready(first, count); });
  return reports && thread_.joinable();
}

void BucketedAllreduce::start_step(std::chrono::steady_clock::time_point step_start, StepGradients& step) {
  step_start_ = step_start;
  step_ = &step;
  held_ = false;
  own_sq_.assign(buckets().size(), 0.0);
  schedule_.restart();
  const std::lock_guard<std::mutex> lock(mutex_);
  completed_ = 0;
}

double BucketedAllreduce::since_step_start() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start_).count();
}

void BucketedAllreduce::start(size_t index) {
  started_s_[index] = since_step_start();
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    to_reduce_.push_back(index);
  }
  wake_.notify_one();
}

void* BucketedAllreduce::begin_reduction(size_t index) {
  // Written by the communication thread, read by the main thread after finish(), which waits for
  // the count of completed buckets under the mutex.
  reduced_s_[2 * index] = since_step_start();
  const BucketRange& b = buckets()[index];
  own_sq_[index] =
      own_norm_then_add(data_ + b.first, step_->earlier != nullptr ? step_->earlier + b.first : nullptr, b.count);
  if (compression_ == GradCompression::kNone || sparse_bucket(index)) return data_ + b.first;
  compress(data_ + b.first, wire_.data() + b.first, b.count, 1.0f / static_cast<float>(size_ * step_->micro_batches),
           compression_);
  return wire_.data() + b.first;
}

std::unique_ptr<InFlightSum> BucketedAllreduce::start_bucket(size_t index, void* data, int lane) {
  if (sparse_bucket(index)) return std::make_unique<SparseRowsSum>(data_, sparse_rows_, sparse_width_, comm_, lane);
  if (sharded_) {
    return std::make_unique<RingSum>(data, buckets()[index].count, compression_, comm_, lane, RingPart::kReduceScatter);
  }
  return start_sum(data, buckets()[index].count, compression_, comm_, lane, hierarchy_);
}

void BucketedAllreduce::end_reduction(size_t index, const InFlightSum& sum) {
  const BucketRange& b = buckets()[index];
  if (sparse_bucket(index)) {
    const auto& rows = static_cast<const SparseRowsSum&>(sum);
    rows_share_ = static_cast<double>(rows.rows_sent()) / (static_cast<double>(size_) * sparse_rows_);
    went_dense_ = rows.dense();
    // Summed in fp32, unscaled: where the other buckets were divided before their sum, so is it now.
    if (compression_ != GradCompression::kNone) {
      scale_and_norm(data_ + b.first, b.count, 1.0f / static_cast<float>(size_ * step_->micro_batches));
    }
  } else if (compression_ != GradCompression::kNone) {
    // Sharded, only this rank's share holds the sum.
    const ParamRange part = sharded_ ? owned(index) : ParamRange{b.first, b.count};
    widen(wire_.data() + part.first, data_ + part.first, part.count, compression_);
  }
  reduced_s_[2 * index + 1] = since_step_start();
}

void BucketedAllreduce::reduce(size_t index) {
  thread_local Pacer pacer;
  const std::unique_ptr<InFlightSum> sum = start_bucket(index, begin_reduction(index), 0);
  while (!sum->done()) pacer.after(sum->progress());
  end_reduction(index, *sum);
}

void BucketedAllreduce::launch_ready(std::vector<InFlight>& in_flight, std::unique_lock<std::mutex>& lock) {
  // A bucket starts on its lane (its index's parity: every rank gives it the same) once the
  // bucket before it there is done, in the order they were handed over on each lane; so up to
  // kRingLanes are in flight, each lane's in the same order on every rank. One small enough for
  // MPI_Allreduce, a collective that blocks, only when none is in flight, and nothing after it
  // before it.
  for (auto next = to_reduce_.begin(); next != to_reduce_.end();) {
    const size_t index = *next;
    const BucketRange& b = buckets()[index];
    const int lane = static_cast<int>(index % kRingLanes);
    const auto value_bytes = static_cast<size_t>(wire_bytes(compression_));
    if (!sparse_bucket(index) && !RingSum::goes_round(b.count, value_bytes, static_cast<size_t>(size_))) {
      if (!in_flight.empty()) break;
    } else if (std::any_of(in_flight.begin(), in_flight.end(), [&](const InFlight& f) { return f.lane == lane; })) {
      ++next;
      continue;
    }
    next = to_reduce_.erase(next);
    lock.unlock();
    in_flight.push_back({index, lane, start_bucket(index, begin_reduction(index), lane)});
    lock.lock();
    next = to_reduce_.begin();  // the deque may have grown meanwhile
  }
}

void BucketedAllreduce::communicate() {
  // This thread's passes over a bucket (its norm, the earlier micro-batches, compression) run on
  // it alone: a team of OpenMP's default size would take the cores of backward's threads, which
  // run meanwhile (a 3-rank test of small buckets on two cores: 19.0 s with it, 0.7 s without).
  omp_set_num_threads(1);
  std::vector<InFlight> in_flight;
  Pacer pacer;
  std::unique_lock<std::mutex> lock(mutex_);
  try {
    while (true) {
      if (in_flight.empty()) wake_.wait(lock, [&] { return stop_ || !to_reduce_.empty(); });
      if (in_flight.empty() && to_reduce_.empty()) return;  // stopped, nothing handed over left
      launch_ready(in_flight, lock);
      lock.unlock();
      bool moved = false;
      size_t finished = 0;
      for (auto f = in_flight.begin(); f != in_flight.end();) {
        moved = f->sum->progress() || moved;
        if (!f->sum->done()) {
          ++f;
          continue;
        }
        end_reduction(f->index, *f->sum);
        f = in_flight.erase(f);
        ++finished;
      }
      pacer.after(moved || finished > 0);
      lock.lock();
      if (finished > 0) {
        completed_ += finished;
        done_.notify_all();
      }
    }
  } catch (const std::exception& e) {
    // An MPI error with MPI_ERRORS_RETURN: hand it to finish(), which throws it on the main
    // thread; the communicator is then unusable, and the case with it.
    if (!lock.owns_lock()) lock.lock();
    error_ = e.what();
    to_reduce_.clear();
    done_.notify_all();
    wake_.wait(lock, [&] { return stop_; });
  }
}

void BucketedAllreduce::ready(size_t first, size_t count) {
  if (!held_) schedule_.ready(first, count, [this](size_t index) { start(index); });
}

void BucketedAllreduce::finish() {
  // The buckets not started yet, in the order of ready(), so that a rank whose backward failed
  // half-way reduces them in the order the others do.
  schedule_.start_rest([this](size_t index) { start(index); });
  if (thread_.joinable()) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return completed_ == buckets().size() || !error_.empty(); });
    if (!error_.empty()) throw std::runtime_error("bucketed all-reduce: " + error_);
  } else {
    // No communication thread: every bucket is reduced here, in the order they were handed over.
    for (; !to_reduce_.empty(); to_reduce_.pop_front()) reduce(to_reduce_.front());
  }
  stepped_ = true;
  const size_t n = buckets().empty() ? 0 : buckets().back().first + buckets().back().count;
  step_->last_sq = 0;
  for (double sq : own_sq_) step_->last_sq += sq;
  // Compressed, each bucket was divided before its sum.
  const float mean =
      compression_ == GradCompression::kNone ? 1.0f / static_cast<float>(size_ * step_->micro_batches) : 1.0f;
  if (!sharded_) {
    step_->mean_sq = scale_and_norm(data_, n, mean);
  } else {
    // Each rank holds its share of the average: the norm is the sum of the shares' (the
    // communication thread waits for the next step meanwhile, so this thread may call MPI).
    double sq = 0;
    for (const ParamRange& r : shard_.ranges) sq += scale_and_norm(data_ + r.first, r.count, mean);
    DLSCALE_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &sq, 1, MPI_DOUBLE, MPI_SUM, comm_));
    step_->mean_sq = sq;
  }
  step_ = nullptr;
}

void BucketedAllreduce::gather_parameters(Model& model) {
  if (!sharded_) return;
  const ParameterBuffer params = model.parameters();
  if (params.data == nullptr || params.count < count_) {
    throw std::logic_error("a sharded optimiser needs the model's parameters in host memory");
  }
  char* data = static_cast<char*>(params.data);
  // From the last bucket, as they were reduced, two rings in flight; one small enough for a
  // blocking MPI call only when none is (as launch_ready()).
  std::vector<std::unique_ptr<RingSum>> lanes(kRingLanes);
  Pacer pacer;
  const auto drain = [&](std::unique_ptr<RingSum>& ring) {
    while (ring && !ring->done()) pacer.after(ring->progress());
    ring.reset();
  };
  for (size_t i = buckets().size(); i-- > 0;) {
    const BucketRange& b = buckets()[i];
    std::unique_ptr<RingSum>& lane = lanes[i % kRingLanes];
    if (!RingSum::goes_round(b.count, params.value_bytes, static_cast<size_t>(size_))) {
      for (auto& l : lanes) drain(l);
    }
    // The other lane's ring moves on while this one's waits for its lane.
    while (lane && !lane->done()) {
      bool moved = false;
      for (auto& l : lanes) moved = (l && l->progress()) || moved;
      pacer.after(moved);
    }
    lane = RingSum::all_gather(data + b.first * params.value_bytes, b.count, params.value_bytes, comm_,
                               static_cast<int>(i % kRingLanes));
  }
  for (auto& l : lanes) drain(l);
  model.parameters_changed();
}

}  // namespace dlscale
