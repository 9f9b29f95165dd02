// A finished case as the results file holds it: its attributes and summary made from the records
// of schema/case_record.h and schema/accuracy_record.h, and the field tables of what only the
// harness's own types hold (utilisation, memory, timeline). docs/schema.md describes each field.
#pragma once

#include <string>
#include <vector>

#include "io/results_file.h"
#include "suite/case/case_result.h"

namespace dlscale {

/// /cases/NNNN's attributes, in the order they are written.
Attrs case_attrs(const CaseResult& r);

/// /cases/NNNN/summary's attributes (a timing case that succeeded; empty otherwise).
Attrs summary_attrs(const CaseResult& r);

/// The whole case group as the results file writes it (attributes, samples, memory, summary,
/// an accuracy case's repeats).
CaseRecord case_record(const CaseResult& r);

/// /cases/NNNN/utilisation.
GroupRecord utilisation_group(const CaseUtilisation& u);

/// /cases/NNNN/timeline (--phases; docs/timelines.md): every rank's step starts, bucket
/// reductions and clock offsets to rank 0, for a case of `ranks` ranks that recorded `iterations`
/// timed steps with `buckets` MPI buckets (0: none).
GroupRecord timeline_group(const CaseTimeline& t, int64_t ranks, int64_t iterations, int64_t buckets);

/// /cases/NNNN/noise_scale: the estimate, its definition, and the steps' two norms.
GroupRecord noise_scale_group(const CaseNoiseScale& n);

/// The names of the timeline group's data sets, in order (results/dlscale_report/timeline.py,
/// DATASETS).
std::vector<std::string> timeline_dataset_names();

/// The names of the summary's step statistics, in order: what the Python reader recomputes
/// (results/dlscale_report/stats.py, SUMMARY_KEYS).
std::vector<std::string> step_summary_keys();

/// The names of the summary's per-phase medians, in order (stats.py, PHASE_SUMMARY_KEYS).
std::vector<std::string> phase_summary_keys();

}  // namespace dlscale
