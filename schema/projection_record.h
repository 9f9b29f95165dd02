// /cases/NNNN/projection (docs/schema.md): the ring all-reduce fits of a case's microbenchmark
// and the step times projected from them (suite/meters/projection.h), written by dlscale and read
// back by dlscale-project's measured platform (project/cli/case_inputs.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schema/fields.h"

namespace dlscale {

struct ProjectionRecord {
  std::string model = "ring";
  /// The case's own microbenchmark's fit, and the ranks and hosts it ran on.
  double alpha_s = 0, beta_s_per_byte = 0;
  int64_t fit_ranks = 0, hosts = 0;
  /// The fits within a host and between hosts (NaN where not measured), and where P crosses.
  int64_t ranks_per_host = 0;
  double within_alpha_s = 0, within_beta_s_per_byte = 0, between_alpha_s = 0, between_beta_s_per_byte = 0;
  std::string network_note;
  double compute_s = 0, grad_bytes = 0;
  /// A sharded optimiser's update of its share (not in compute_s): 1/P of the parameters' work.
  double sharded_update_s = 0;
  std::string scaling;
  /// One entry per projected rank count.
  std::vector<int64_t> ranks;
  std::vector<double> step_s, efficiency;
  std::vector<int64_t> between_hosts;
};

inline const Field<ProjectionRecord> kProjectionFields[] = {
    member<&ProjectionRecord::model>("model"),
    member<&ProjectionRecord::alpha_s>("alpha_s"),
    member<&ProjectionRecord::beta_s_per_byte>("beta_s_per_byte"),
    member<&ProjectionRecord::fit_ranks>("fit_ranks"),
    member<&ProjectionRecord::hosts>("hosts"),
    member<&ProjectionRecord::ranks_per_host>("ranks_per_host"),
    member<&ProjectionRecord::within_alpha_s>("within_alpha_s"),
    member<&ProjectionRecord::within_beta_s_per_byte>("within_beta_s_per_byte"),
    member<&ProjectionRecord::between_alpha_s>("between_alpha_s"),
    member<&ProjectionRecord::between_beta_s_per_byte>("between_beta_s_per_byte"),
    member<&ProjectionRecord::network_note>("network_note"),
    member<&ProjectionRecord::compute_s>("compute_s"),
    member<&ProjectionRecord::grad_bytes>("grad_bytes"),
    member<&ProjectionRecord::sharded_update_s>("sharded_update_s"),
    member<&ProjectionRecord::scaling>("scaling"),
};

inline const DatasetField<ProjectionRecord> kProjectionDatasets[] = {
    vector_member<&ProjectionRecord::ranks>("ranks"),
    vector_member<&ProjectionRecord::step_s>("step_s"),
    vector_member<&ProjectionRecord::efficiency>("efficiency"),
    vector_member<&ProjectionRecord::between_hosts>("between_hosts"),
};

}  // namespace dlscale
