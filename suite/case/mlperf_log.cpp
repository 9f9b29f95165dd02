#include "suite/case/mlperf_log.h"

#include <chrono>

namespace dlscale {

namespace {

constexpr const char* kPoint = "POINT_IN_TIME";
constexpr const char* kStart = "INTERVAL_START";
constexpr const char* kEnd = "INTERVAL_END";

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

void MlperfLog::add(const char* type, std::string key, MllogEvent::Value value,
                    std::vector<std::pair<std::string, MllogEvent::Value>> metadata, bool valueless) {
  events_.push_back({now_ms(), type, std::move(key), std::move(value), valueless, std::move(metadata)});
}

void MlperfLog::start(int repeat, uint64_t seed) {
  events_.clear();
  // dlscale's logs are not MLPerf submissions: the submission fields say what ran, in the open
  // division, as research.
  add(kPoint, "submission_benchmark", context_.benchmark);
  add(kPoint, "submission_org", std::string("dlscale"));
  add(kPoint, "submission_division", std::string("open"));
  add(kPoint, "submission_status", std::string("research"));
  add(kPoint, "submission_platform", context_.platform);
  // Every repeat starts from data already in memory: there is no file cache to clear.
  add(kPoint, "cache_clear", true);
  add(kStart, "init_start", false, {{"repeat", int64_t{repeat}}}, true);
  add(kPoint, "global_batch_size", context_.global_batch);
  add(kPoint, "gradient_accumulation_steps", context_.accumulate);
  add(kPoint, "opt_name", context_.optimizer);
  add(kPoint, "opt_base_learning_rate", context_.learning_rate);
  add(kPoint, "opt_learning_rate_warmup_epochs", context_.warmup_epochs);
  add(kPoint, "seed", static_cast<int64_t>(seed));
  add(kPoint, "train_samples", context_.train_samples);
  add(kPoint, "eval_samples", context_.eval_samples);
}

void MlperfLog::run_start() {
  add(kEnd, "init_stop", false, {}, true);
  add(kStart, "run_start", false, {}, true);
}

void MlperfLog::epoch_start(int epoch, int64_t samples) {
  add(kStart, "epoch_start", false, {{"epoch_num", int64_t{epoch}}, {"samples_count", samples}}, true);
}

void MlperfLog::epoch_stop(int epoch, int64_t samples) {
  add(kEnd, "epoch_stop", false, {{"epoch_num", int64_t{epoch}}, {"samples_count", samples}}, true);
}

void MlperfLog::eval_start(int epoch, int64_t samples) {
  add(kStart, "eval_start", false, {{"epoch_num", int64_t{epoch}}, {"samples_count", samples}}, true);
}

void MlperfLog::eval_stop(int epoch, int64_t samples, double accuracy) {
  add(kPoint, "eval_accuracy", accuracy, {{"epoch_num", int64_t{epoch}}, {"samples_count", samples}});
  add(kEnd, "eval_stop", false, {{"epoch_num", int64_t{epoch}}, {"samples_count", samples}}, true);
}

void MlperfLog::run_stop(bool reached_target) {
  add(kEnd, "run_stop", false, {{"status", std::string(reached_target ? "success" : "aborted")}}, true);
  repeats_.push_back(std::move(events_));
  events_.clear();
}

}  // namespace dlscale
