// An accuracy case's results (docs/schema.md, "Accuracy cases"): each repeat's attributes and its
// table of epochs (/cases/NNNN/repeats/RR), and the means and 95% intervals over the repeats
// (/cases/NNNN/accuracy_summary). The accuracy mode fills these typed records; the results file,
// the case's line and the summary over repeats are made from them.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "schema/fields.h"

namespace dlscale {

/// One evaluation of one repeat on the validation set: a row of repeats/RR/epochs, one per epoch
/// unless --eval-every asks for one every N samples. The training figures cover the steps since
/// the evaluation before.
struct EpochResult {
  int64_t epoch = 0;  ///< the epoch the evaluation came in (at its end, without --eval-every)
  double train_loss = 0, train_time_s = 0, cumulative_train_time_s = 0;
  double val_accuracy = 0, val_loss = 0, eval_time_s = 0;
  int64_t step = 0, samples = 0;  ///< optimiser steps and training samples of the repeat so far
};

inline const ColumnField<EpochResult> kEpochColumns[] = {
    {"epoch", [](const EpochResult& e, size_t) -> AttrValue { return e.epoch; }},
    {"train_loss", [](const EpochResult& e, size_t) -> AttrValue { return e.train_loss; }},
    {"train_time_s", [](const EpochResult& e, size_t) -> AttrValue { return e.train_time_s; }},
    {"cumulative_train_time_s", [](const EpochResult& e, size_t) -> AttrValue { return e.cumulative_train_time_s; }},
    {"val_accuracy", [](const EpochResult& e, size_t) -> AttrValue { return e.val_accuracy; }},
    {"val_loss", [](const EpochResult& e, size_t) -> AttrValue { return e.val_loss; }},
    {"eval_time_s", [](const EpochResult& e, size_t) -> AttrValue { return e.eval_time_s; }},
    {"step", [](const EpochResult& e, size_t) -> AttrValue { return e.step; }},
    {"samples", [](const EpochResult& e, size_t) -> AttrValue { return e.samples; }},
};

/// One repeat: training from fresh parameters until the epoch limit or the target, then testing.
struct RepeatResult {
  int64_t seed = 0, epochs_run = 0;
  int64_t evaluations = 0;                 ///< rows of `epochs`
  int64_t steps_run = 0, samples_run = 0;  ///< optimiser steps and training samples of the repeat
  double train_time_s = 0;                 ///< summed over the epochs run, evaluation excluded
  double test_time_s = 0, test_accuracy = 0, test_loss = 0;
  /// To the first evaluation that reached the target: training time, optimiser steps, training
  /// samples and epochs (samples over an epoch's); NaN, or 0 for the counts, when it was not
  /// reached (or none was set).
  double time_to_target_s = std::numeric_limits<double>::quiet_NaN();
  int64_t steps_to_target = 0, samples_to_target = 0;
  double epochs_to_target = std::numeric_limits<double>::quiet_NaN();
  bool target_reached = false;
  int64_t target_epoch = 0;  ///< 0 when not reached
  std::vector<EpochResult> epochs;
};

inline const Field<RepeatResult> kRepeatFields[] = {
    member<&RepeatResult::seed>("seed"),
    member<&RepeatResult::epochs_run>("epochs_run"),
    member<&RepeatResult::train_time_s>("train_time_s"),
    member<&RepeatResult::test_time_s>("test_time_s"),
    member<&RepeatResult::test_accuracy>("test_accuracy"),
    member<&RepeatResult::test_loss>("test_loss"),
    member<&RepeatResult::time_to_target_s>("time_to_target_s"),
    member<&RepeatResult::target_reached>("target_reached"),
    member<&RepeatResult::target_epoch>("target_epoch"),
    member<&RepeatResult::evaluations>("evaluations"),
    member<&RepeatResult::steps_run>("steps_run"),
    member<&RepeatResult::samples_run>("samples_run"),
    member<&RepeatResult::steps_to_target>("steps_to_target"),
    member<&RepeatResult::samples_to_target>("samples_to_target"),
    member<&RepeatResult::epochs_to_target>("epochs_to_target"),
};

/// A mean over repeats and its 95% confidence interval (suite/meters/statistics.h, mean_ci95).
struct MeanInterval {
  double mean = 0, low = 0, high = 0;
};

/// The summary over an accuracy case's repeats.
struct AccuracySummary {
  MeanInterval test_accuracy, train_time_s, test_time_s;
  MeanInterval time_to_target_s;  ///< over the repeats that reached the target; NaN when none did
  int64_t targets_reached = 0;
};

inline const Field<AccuracySummary> kAccuracySummaryFields[] = {
    {"test_accuracy_mean", [](const AccuracySummary& s) -> AttrValue { return s.test_accuracy.mean; }},
    {"test_accuracy_ci95_low", [](const AccuracySummary& s) -> AttrValue { return s.test_accuracy.low; }},
    {"test_accuracy_ci95_high", [](const AccuracySummary& s) -> AttrValue { return s.test_accuracy.high; }},
    {"train_time_mean_s", [](const AccuracySummary& s) -> AttrValue { return s.train_time_s.mean; }},
    {"train_time_ci95_low_s", [](const AccuracySummary& s) -> AttrValue { return s.train_time_s.low; }},
    {"train_time_ci95_high_s", [](const AccuracySummary& s) -> AttrValue { return s.train_time_s.high; }},
    {"test_time_mean_s", [](const AccuracySummary& s) -> AttrValue { return s.test_time_s.mean; }},
    {"test_time_ci95_low_s", [](const AccuracySummary& s) -> AttrValue { return s.test_time_s.low; }},
    {"test_time_ci95_high_s", [](const AccuracySummary& s) -> AttrValue { return s.test_time_s.high; }},
    {"time_to_target_mean_s", [](const AccuracySummary& s) -> AttrValue { return s.time_to_target_s.mean; }},
    {"time_to_target_ci95_low_s", [](const AccuracySummary& s) -> AttrValue { return s.time_to_target_s.low; }},
    {"time_to_target_ci95_high_s", [](const AccuracySummary& s) -> AttrValue { return s.time_to_target_s.high; }},
    member<&AccuracySummary::targets_reached>("targets_reached"),
};

/// repeats/RR as the results file holds it: the repeat's attributes and its table "epochs".
inline GroupRecord repeat_group(const RepeatResult& r) {
  GroupRecord g;
  g.attrs = attrs_of(r, kRepeatFields);
  g.tables.emplace_back("epochs", table_of(r.epochs, kEpochColumns));
  return g;
}

}  // namespace dlscale
