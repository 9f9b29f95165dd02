// /cases/NNNN/simulations/KKKK (docs/schema.md, "Simulations"): one run of dlscale-project on a
// case, the step simulated with SimGrid at each rank count (project/cli/main.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schema/fields.h"

namespace dlscale {

struct SimulationRecord {
  std::string source = "dlscale-project";
  std::string simgrid_version, platform, platform_toml, platform_xml, placement;
  std::string allreduce;            ///< "ring" or "binomial"
  std::string allreduce_source;     ///< "recorded" (the case's mechanism) or "--allreduce"
  std::string sharding;             ///< the case's: "none", or "optimizer" (reduce-scatter, then all-gather)
  std::string allreduce_hierarchy;  ///< "flat" or "host" (two levels): the case's, or --allreduce-hierarchy
  std::string model;                ///< "flow" or "message"
  int64_t steps = 0, seed = 0;
  bool overlap = false;
  std::string progress;          ///< "thread" or "polling"
  std::string bucket_readiness;  ///< "measured" or "estimated"
  std::string scaling;
  int64_t measured_ranks = 0;
  double measured_step_s = 0;
  double error = 0;  ///< simulated / measured step - 1 at the measured P
  /// One entry per simulated rank count: the step and its parts.
  std::vector<int64_t> ranks;
  std::vector<double> step_s, efficiency, compute_s, straggler_wait_s, exposed_allreduce_s, update_s;
  /// The part of update_s after the last rank's update: the parameters' all-gather (0 unsharded).
  std::vector<double> parameter_gather_s;
  /// The bytes of an embedding's rows all-gathered (--sparse-embedding); 0 where it went dense
  /// round the ring, or the case has none.
  std::vector<double> embedding_rows_bytes;
  /// One entry per gradient bucket, in the order backward makes them ready.
  std::vector<double> bucket_bytes, bucket_ready_fraction;
};

inline const Field<SimulationRecord> kSimulationFields[] = {
    member<&SimulationRecord::source>("source"),
    member<&SimulationRecord::simgrid_version>("simgrid_version"),
    member<&SimulationRecord::platform>("platform"),
    member<&SimulationRecord::platform_toml>("platform_toml"),
    member<&SimulationRecord::platform_xml>("platform_xml"),
    member<&SimulationRecord::placement>("placement"),
    member<&SimulationRecord::allreduce>("allreduce"),
    member<&SimulationRecord::allreduce_source>("allreduce_source"),
    member<&SimulationRecord::sharding>("sharding"),
    member<&SimulationRecord::allreduce_hierarchy>("allreduce_hierarchy"),
    member<&SimulationRecord::model>("model"),
    member<&SimulationRecord::steps>("steps"),
    member<&SimulationRecord::seed>("seed"),
    member<&SimulationRecord::overlap>("overlap"),
    member<&SimulationRecord::progress>("progress"),
    member<&SimulationRecord::bucket_readiness>("bucket_readiness"),
    member<&SimulationRecord::scaling>("scaling"),
    member<&SimulationRecord::measured_ranks>("measured_ranks"),
    member<&SimulationRecord::measured_step_s>("measured_step_s"),
    member<&SimulationRecord::error>("error"),
};

inline const DatasetField<SimulationRecord> kSimulationDatasets[] = {
    vector_member<&SimulationRecord::ranks>("ranks"),
    vector_member<&SimulationRecord::step_s>("step_s"),
    vector_member<&SimulationRecord::efficiency>("efficiency"),
    vector_member<&SimulationRecord::compute_s>("compute_s"),
    vector_member<&SimulationRecord::straggler_wait_s>("straggler_wait_s"),
    vector_member<&SimulationRecord::exposed_allreduce_s>("exposed_allreduce_s"),
    vector_member<&SimulationRecord::update_s>("update_s"),
    vector_member<&SimulationRecord::bucket_bytes>("bucket_bytes"),
    vector_member<&SimulationRecord::bucket_ready_fraction>("bucket_ready_fraction"),
    vector_member<&SimulationRecord::parameter_gather_s>("parameter_gather_s"),
    vector_member<&SimulationRecord::embedding_rows_bytes>("embedding_rows_bytes"),
};

}  // namespace dlscale
