// The events of an accuracy case's repeat in MLPerf Training's logging format (--mllog DIR;
// docs/running.md, "MLPerf logs"): the keys the MLPerf compliance checker's common rules require
// of every submission, in the order they happen, each with its wall-clock time. Collected on every
// rank as the repeat runs (nothing is written inside a repeat); the case's rank 0 hands them to the
// reporter that writes one log per case and repeat (suite/record/mllog.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace dlscale {

/// One `:::MLLOG` line: time_ms, event_type, key, value, metadata.
struct MllogEvent {
  using Value = std::variant<std::string, int64_t, double, bool>;
  double time_ms = 0;      ///< milliseconds since the Unix epoch
  std::string event_type;  ///< POINT_IN_TIME, INTERVAL_START or INTERVAL_END
  std::string key;
  Value value;  ///< a bool false with `valueless`: JSON null
  bool valueless = false;
  std::vector<std::pair<std::string, Value>> metadata;
};

/// What a repeat's log says besides its events' own values.
struct MllogContext {
  std::string benchmark;  ///< the workload
  std::string platform;   ///< e.g. "2 ranks x cpu (host)"
  int64_t global_batch = 0, accumulate = 1;
  std::string optimizer;
  double learning_rate = 0, warmup_epochs = 0;
  int64_t train_samples = 0, eval_samples = 0;
};

/// The events of one repeat after another (the methods in the order a repeat calls them).
class MlperfLog {
 public:
  void set_context(MllogContext context) { context_ = std::move(context); }
  /// A repeat begins: the submission's fields, the cache clear, init_start, the hyperparameters
  /// and the seed, init_stop (its parameters are loaded between start() and run_start()).
  void start(int repeat, uint64_t seed);
  void run_start();
  void epoch_start(int epoch, int64_t samples);
  void epoch_stop(int epoch, int64_t samples);
  void eval_start(int epoch, int64_t samples);
  void eval_stop(int epoch, int64_t samples, double accuracy);
  /// The repeat ends: run_stop, "success" when it reached its target, else "aborted". Its
  /// events move to repeats().
  void run_stop(bool reached_target);
  /// Every finished repeat's events, in repeat order.
  std::vector<std::vector<MllogEvent>>& repeats() { return repeats_; }

 private:
  void add(const char* type, std::string key, MllogEvent::Value value,
           std::vector<std::pair<std::string, MllogEvent::Value>> metadata = {}, bool valueless = false);
  MllogContext context_;
  std::vector<MllogEvent> events_;
  std::vector<std::vector<MllogEvent>> repeats_;
};

}  // namespace dlscale
