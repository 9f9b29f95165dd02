#include "suite/case/accuracy_mode.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "suite/case/gradient_noise.h"
#include "suite/case/outcome.h"
#include "suite/case/run_mode.h"
#include "suite/case/training_step.h"
#include "suite/data/accuracy_data.h"
#include "suite/errors.h"
#include "suite/exit_code.h"
#include "suite/meters/statistics.h"
#include "suite/process/stop_signals.h"
#include "workloads/init.h"

namespace dlscale {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// The repeats of one case on this rank. Every method that ends in a collective is reached by
/// every rank: a rank that failed goes on through the same calls (training on its last batch,
/// evaluating nothing) until the next settle() ends the case on all of them together.
class AccuracyLoop {
 public:
  AccuracyLoop(const CaseSpec& spec, const Workload& w, MPI_Comm comm, TrainingParts parts, const Dataset& train,
               const Dataset& test, Progress& progress, std::string host)
      : spec_(spec),
        workload_(w),
        comm_(comm),
        parts_(parts),
        train_(train),
        test_(test),
        progress_(progress),
        host_(std::move(host)) {
    DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &rank_));
    DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &ranks_));
  }

  AccuracyResult run() {
    started_ = Clock::now();
    deadline_ = deadline_after(spec_.case_timeout);
    // The split is drawn from the case seed: every repeat holds out the same samples.
    split_ = split_training_set(train_.size(), spec_.validation, spec_.seed);
    result_.train_samples = static_cast<int64_t>(split_.train.size());
    result_.validation_samples = static_cast<int64_t>(split_.validation.size());
    result_.test_samples = test_.size();
    const Shard v = shard_of(result_.validation_samples, rank_, ranks_);
    validation_shard_.assign(split_.validation.begin() + v.first, split_.validation.begin() + v.first + v.count);
    const Shard t = shard_of(test_.size(), rank_, ranks_);
    for (int64_t i = 0; i < t.count; ++i) test_shard_.push_back(t.first + i);
    const int64_t steps_per_epoch = static_cast<int64_t>(split_.train.size()) / spec_.global_batch();
    epoch_samples_ = std::max<int64_t>(1, steps_per_epoch * spec_.global_batch());
    warmup_steps_ = std::llround(spec_.lr_warmup_epochs * static_cast<double>(steps_per_epoch));
    log_.set_context({spec_.workload, fmt::format("{} rank(s) x {} ({})", ranks_, device_name(spec_.device), host_),
                      spec_.global_batch(), spec_.accumulate, optimizer_name(spec_.optimizer),
                      spec_.scaled_learning_rate(), spec_.lr_warmup_epochs, result_.train_samples,
                      result_.validation_samples});
    for (int r = 0; r < spec_.repeats; ++r) {
      if (!run_repeat(r)) return finish();
    }
    result_.summary = accuracy_summary(result_.repeats);
    return finish();
  }

  /// The result, with the steps' norms for the noise scale and the repeats' MLPerf events.
  AccuracyResult finish() {
    result_.small_sq = std::move(small_sq_);
    result_.big_sq = std::move(big_sq_);
    result_.mllog = std::move(log_.repeats());
    return std::move(result_);
  }

 private:
  /// Sums `values` over the ranks together with whether any rank failed or was asked to stop;
  /// false when the case ends here (result_ says why, the same on every rank). Collective.
  bool settle(std::vector<double>& values, Outcome failed, const std::string& where) {
    if (failed.ok() && spec_.case_timeout > 0 && seconds_since(started_) > spec_.case_timeout) {
      failed = {Status::kTimeout, fmt::format("still training after --case-timeout {} s", spec_.case_timeout)};
    }
    if (!failed.ok()) failed.message = fmt::format("{}: {}", where, failed.message);
    std::vector<double> mine = values, sum(values.size() + 2);
    mine.push_back(failed.ok() ? 0 : 1);
    mine.push_back(stop_signal() != 0 ? 1 : 0);
    DLSCALE_CHECK_MPI(
        MPI_Allreduce(mine.data(), sum.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_SUM, comm_));
    if (sum[values.size()] > 0) {
      result_.outcome = agree(comm_, failed);
      return false;
    }
    if (sum[values.size() + 1] > 0) {
      result_.interrupted = true;
      return false;
    }
    std::copy(sum.begin(), sum.begin() + static_cast<std::ptrdiff_t>(values.size()), values.begin());
    return true;
  }

  double max_over_ranks(double mine) const {
    double out = 0;
    DLSCALE_CHECK_MPI(MPI_Allreduce(&mine, &out, 1, MPI_DOUBLE, MPI_MAX, comm_));
    return out;
  }

  /// Inference over this rank's `shard` of `data` in batches of the case's per-rank batch,
  /// summed over the ranks; `seconds` the slowest rank's time from a common start. Collective.
  bool evaluate(const Dataset& data, const std::vector<int64_t>& shard, const std::string& where, Evaluation& total,
                double& seconds) {
    Outcome failed;
    Evaluation mine;
    DLSCALE_CHECK_MPI(MPI_Barrier(comm_));
    const Clock::time_point start = Clock::now();
    try {
      const auto b = static_cast<size_t>(spec_.batch_per_rank());
      for (size_t first = 0; first < shard.size(); first += b) {
        const Evaluation e =
            parts_.model.evaluate(gather_samples(data, shard.data() + first, std::min(b, shard.size() - first)));
        mine.loss_sum += e.loss_sum;
        mine.correct += e.correct;
        mine.predictions += e.predictions;
      }
    } catch (...) {
      failed = outcome_of(std::current_exception());
    }
    const double mine_s = seconds_since(start);
    // Counts stay exact as doubles far beyond any data set (2^53).
    std::vector<double> sums = {mine.loss_sum, static_cast<double>(mine.correct),
                                static_cast<double>(mine.predictions)};
    if (!settle(sums, failed, where)) return false;
    total = {sums[0], static_cast<int64_t>(sums[1]), static_cast<int64_t>(sums[2])};
    seconds = max_over_ranks(mine_s);
    return true;
  }

  /// Evaluates on the validation set after `since` of training (the slowest rank's, from the
  /// segment's barrier), adds a row to `rep` and says whether it reached the target; false when the
  /// case ends here. Collective.
  bool evaluate_now(int repeat, int epoch, RepeatResult& rep, const Clock::time_point& since, bool& reached) {
    Interval& iv = interval_;
    const double train_s = carried_s_ + max_over_ranks(seconds_since(since));
    carried_s_ = 0;
    Evaluation val;
    double eval_s = 0;
    log_.eval_start(epoch, samples_);
    if (!evaluate(train_, validation_shard_, fmt::format("repeat {} epoch {}: validation", repeat + 1, epoch), val,
                  eval_s)) {
      return false;
    }
    cumulative_ += train_s;
    const double accuracy = static_cast<double>(val.correct) / static_cast<double>(val.predictions);
    const double val_loss = val.loss_sum / static_cast<double>(val.predictions);
    const double loss = iv.steps > 0 ? iv.loss_sum / static_cast<double>(iv.steps) : kNaN;
    rep.epochs.push_back({epoch, loss, train_s, cumulative_, accuracy, val_loss, eval_s, steps_, samples_});
    log_.eval_stop(epoch, samples_, accuracy);
    iv = {};
    progress_.note(fmt::format(
        "repeat {}/{} epoch {}/{}{}: train loss {:.4f} ({:.2f} s) | validation accuracy {:.4f}, loss {:.4f} ({:.2f} s)",
        repeat + 1, spec_.repeats, epoch, spec_.epochs,
        spec_.eval_every > 0 ? fmt::format(" ({} samples)", samples_) : std::string(), loss, train_s, accuracy,
        val_loss, eval_s));
    reached = std::isfinite(spec_.target_accuracy) && accuracy >= spec_.target_accuracy;
    if (reached) {
      rep.target_reached = true;
      rep.target_epoch = epoch;
      rep.time_to_target_s = cumulative_;
      rep.steps_to_target = steps_;
      rep.samples_to_target = samples_;
      rep.epochs_to_target = static_cast<double>(samples_) / static_cast<double>(epoch_samples_);
    }
    return true;
  }

  /// The learning rate of the next step: from --lr rising linearly to the scaled rate over the
  /// warm-up's steps (Goyal et al.), then the scaled rate.
  double learning_rate() const {
    const double scaled = spec_.scaled_learning_rate();
    if (warmup_steps_ <= 0 || steps_ >= warmup_steps_) return scaled;
    const double f = static_cast<double>(steps_ + 1) / static_cast<double>(warmup_steps_);
    return spec_.learning_rate + (scaled - spec_.learning_rate) * f;
  }

  /// One epoch of training, evaluating every --eval-every samples (else once, at its end);
  /// `reached`: an evaluation reached the target (the repeat stops there). False when the case
  /// ends here. Collective.
  bool train_epoch(int repeat, int epoch, RepeatResult& rep, bool& reached) {
    const std::vector<int64_t> order = epoch_order(split_.train, spec_.seed + static_cast<uint64_t>(repeat), epoch);
    const int64_t global = spec_.global_batch(), mine = spec_.batch_per_rank();
    const int k = spec_.accumulate;
    // The last incomplete global batch is dropped: every step trains on full batches everywhere.
    const int64_t steps = static_cast<int64_t>(order.size()) / global;
    Optimizer opt = spec_.make_optimizer();
    const std::string label = fmt::format("repeat {}/{} epoch {}/{}", repeat + 1, spec_.repeats, epoch, spec_.epochs);
    // A rank's micro-batch j of step s: its k micro-batches lie side by side in the global batch.
    const auto first_of = [&](int64_t s, int j) { return s * global + (int64_t{rank_} * k + j) * mine; };
    const auto load_first = [&](int64_t s) {
      // The first micro-batch goes in before the clock starts: after an evaluation that ended on
      // a shorter batch, set_batch() rebuilds the network for the training batch size (oneDNN's
      // primitives, the CUDA driver's buffers), set-up that is not training. The step copies the
      // same batch again and reports any failure of it.
      try {
        parts_.model.set_batch(gather_samples(train_, order.data() + first_of(s, 0), static_cast<size_t>(mine)));
      } catch (...) {  // NOLINT(bugprone-empty-catch): the step repeats the call and records its outcome
      }
    };
    if (steps > 0) load_first(0);
    log_.epoch_start(epoch, samples_);
    DLSCALE_CHECK_MPI(MPI_Barrier(comm_));
    Clock::time_point since = Clock::now();
    for (int64_t s = 0; s < steps; ++s) {
      const Clock::time_point step_start = Clock::now();
      Outcome failed;
      try {
        parts_.model.set_batch(gather_samples(train_, order.data() + first_of(s, 0), static_cast<size_t>(mine)));
      } catch (...) {
        failed = outcome_of(std::current_exception());
      }
      MicroBatches micro;
      micro.count = k;
      micro.earlier = parts_.earlier;
      micro.load = [&](int j) {
        parts_.model.set_batch(gather_samples(train_, order.data() + first_of(s, j), static_cast<size_t>(mine)));
      };
      double step_loss = 0;
      try {
        opt.learning_rate = learning_rate();
        const StepTimes t = training_step(parts_.model, comm_, opt, false, parts_.buckets, parts_.timer, parts_.reducer,
                                          deadline_, micro, parts_.mpi);
        small_sq_.push_back(t.small_sq);
        big_sq_.push_back(t.big_sq);
        step_loss = parts_.model.loss();
        if (!std::isfinite(step_loss) && failed.ok())
          failed = {Status::kError, fmt::format("the loss is {}", step_loss)};
      } catch (...) {
        if (failed.ok()) failed = outcome_of(std::current_exception());
      }
      std::vector<double> sums = {failed.ok() ? step_loss / ranks_ : 0.0};
      if (!settle(sums, failed, fmt::format("{} step {}", label, s + 1))) return false;
      interval_.loss_sum += sums[0];
      ++interval_.steps;
      ++steps_;
      samples_ += global;
      // The case's share done: its steps so far over all its repeats' steps to the epoch limit.
      const double done_steps = static_cast<double>((repeat * spec_.epochs + epoch - 1) * steps + s + 1);
      progress_.iteration(label.c_str(), static_cast<int>(s + 1), static_cast<int>(steps), seconds_since(step_start),
                          done_steps / static_cast<double>(int64_t{spec_.repeats} * spec_.epochs * steps));
      if (spec_.eval_every > 0 && samples_ >= next_eval_) {
        next_eval_ += spec_.eval_every;
        if (!evaluate_now(repeat, epoch, rep, since, reached)) return false;
        if (reached) {
          log_.epoch_stop(epoch, samples_);
          return true;
        }
        if (s + 1 < steps) load_first(s + 1);
        DLSCALE_CHECK_MPI(MPI_Barrier(comm_));
        since = Clock::now();
      }
    }
    log_.epoch_stop(epoch, samples_);
    if (spec_.eval_every == 0) return evaluate_now(repeat, epoch, rep, since, reached);
    // Training since the last evaluation counts towards the next one.
    carried_s_ += max_over_ranks(seconds_since(since));
    return true;
  }

  bool run_repeat(int repeat) {
    const uint64_t seed = spec_.seed + static_cast<uint64_t>(repeat);
    log_.start(repeat, seed);
    {
      // Fresh parameters; load_parameters() also resets Adam's state and the batch-norm statistics.
      Outcome failed;
      try {
        parts_.model.load_parameters(canonical_parameters(workload_, seed));
      } catch (...) {
        failed = outcome_of(std::current_exception());
      }
      std::vector<double> none;
      if (!settle(none, failed, fmt::format("repeat {}: loading the parameters", repeat + 1))) return false;
    }
    log_.run_start();
    RepeatResult rep;
    rep.seed = static_cast<int64_t>(seed);
    cumulative_ = carried_s_ = 0;
    steps_ = samples_ = 0;
    next_eval_ = spec_.eval_every;
    interval_ = {};
    bool reached = false;
    int epoch = 1;
    for (; epoch <= spec_.epochs && !reached; ++epoch) {
      if (!train_epoch(repeat, epoch, rep, reached)) return false;
    }
    Evaluation test;
    double test_s = 0;
    if (!evaluate(test_, test_shard_, fmt::format("repeat {}: testing", repeat + 1), test, test_s)) return false;
    const double test_accuracy = static_cast<double>(test.correct) / static_cast<double>(test.predictions);
    const double test_loss = test.loss_sum / static_cast<double>(test.predictions);
    progress_.note(fmt::format("repeat {}/{}: test accuracy {:.4f}, loss {:.4f} ({:.2f} s){}", repeat + 1,
                               spec_.repeats, test_accuracy, test_loss, test_s,
                               reached
                                   ? fmt::format(" | target reached at epoch {} ({} steps) after {:.2f} s of training",
                                                 rep.target_epoch, rep.steps_to_target, rep.time_to_target_s)
                                   : std::string()));
    rep.epochs_run = epoch - 1;
    rep.evaluations = static_cast<int64_t>(rep.epochs.size());
    rep.steps_run = steps_;
    rep.samples_run = samples_;
    rep.train_time_s = cumulative_ + carried_s_;
    rep.test_time_s = test_s;
    rep.test_accuracy = test_accuracy;
    rep.test_loss = test_loss;
    log_.run_stop(reached);
    result_.repeats.push_back(std::move(rep));
    return true;
  }

  /// The loss and steps since the last evaluation.
  struct Interval {
    double loss_sum = 0;
    int64_t steps = 0;
  };

  const CaseSpec& spec_;
  const Workload& workload_;
  MPI_Comm comm_;
  TrainingParts parts_;
  const Dataset& train_;
  const Dataset& test_;
  Progress& progress_;
  std::string host_;
  int rank_ = 0, ranks_ = 1;
  Clock::time_point started_;
  Deadline deadline_ = Deadline::max();  ///< --case-timeout from started_: a device reduction's wait ends there
  TrainValidationSplit split_;
  std::vector<int64_t> validation_shard_, test_shard_;
  AccuracyResult result_;
  int64_t epoch_samples_ = 1;  ///< the samples an epoch trains (its steps x the global batch)
  int64_t warmup_steps_ = 0;   ///< --lr-warmup-epochs in steps
  // The repeat in progress:
  double cumulative_ = 0;  ///< training time to the last evaluation
  double carried_s_ = 0;   ///< training time since it (at the ends of epochs without one)
  int64_t steps_ = 0, samples_ = 0, next_eval_ = 0;
  Interval interval_;
  std::vector<double> small_sq_, big_sq_;  ///< the gradient noise scale's norms, every step of every repeat
  MlperfLog log_;
};

}  // namespace

AccuracyResult run_accuracy(const CaseSpec& spec, const Workload& workload, MPI_Comm comm, TrainingParts parts,
                            const Dataset& train, const Dataset& test, Progress& progress, const std::string& host) {
  return AccuracyLoop(spec, workload, comm, parts, train, test, progress, host).run();
}

AccuracySummary accuracy_summary(const std::vector<RepeatResult>& repeats) {
  std::vector<double> accuracy, train, test, to_target;
  for (const RepeatResult& r : repeats) {
    accuracy.push_back(r.test_accuracy);
    train.push_back(r.train_time_s);
    test.push_back(r.test_time_s);
    if (r.target_reached) to_target.push_back(r.time_to_target_s);
  }
  // Time to target: over the repeats that reached it; NaN when none did.
  return {mean_ci95(accuracy), mean_ci95(train), mean_ci95(test), mean_ci95(to_target),
          static_cast<int64_t>(to_target.size())};
}

namespace {

class AccuracyMode final : public CaseMode {
 public:
  explicit AccuracyMode(const CaseContext& ctx) : ctx_(ctx) {}

  void measure(PreparedCase& p) override {
    reset_memory_mark(ctx_.progress);
    try {
      result_ = run_accuracy(ctx_.c.spec, ctx_.c.workload, ctx_.comm,
                             {*p.model, p.timer.get(), p.reducer.get(), p.buckets.get(), &p.earlier_gradients, p.mpi},
                             *p.dataset, *p.test, ctx_.progress, ctx_.mpi.host());
    } catch (const MpiError&) {
      throw;
    } catch (const std::exception& e) {
      // Outside any step (the loop's own failures are agreed in it): the ranks may be apart.
      fmt::print(stderr, "dlscale: rank {}: case {} failed while training and MPI cannot recover: {}\n",
                 ctx_.mpi.rank(), ctx_.c.key, e.what());
      MPI_Abort(MPI_COMM_WORLD, exit_code(ExitCode::kFatal));
    }
  }
  Outcome outcome() const override { return result_.outcome; }
  bool interrupted() const override { return result_.interrupted; }
  RankMemory memory(const PreparedCase& p) const override { return p.memory(); }
  void record(PreparedCase&, CaseResult& r) override {
    if (result_.outcome.ok() && !result_.interrupted) {
      r.noise = gather_noise_scale(ctx_.comm, result_.small_sq, result_.big_sq,
                                   static_cast<double>(ctx_.c.spec.batch_per_rank()),
                                   static_cast<double>(ctx_.c.spec.global_batch()));
    }
    r.accuracy = std::move(result_);
  }

 private:
  const CaseContext& ctx_;
  AccuracyResult result_;
};

}  // namespace

std::unique_ptr<CaseMode> make_accuracy_mode(const CaseContext& ctx) { return std::make_unique<AccuracyMode>(ctx); }

}  // namespace dlscale
