// /allreduce/NNNN (docs/schema.md): one run of the all-reduce microbenchmark, standalone
// (`dlscale allreduce`) or for a case, with the ring fit of its sizes
// (suite/meters/allreduce_microbenchmark.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schema/fields.h"

namespace dlscale {

struct AllreduceRecord {
  std::string backend;
  int64_t ranks = 0;
  std::string dtype = "float32";
  int64_t warmup = 0, iterations = 0;
  std::string for_case;  ///< the case group it was measured for; "" when standalone
  double alpha_s = 0, beta_s_per_byte = 0;
  int64_t hosts = 0;
  std::string network;        ///< "within one host" or "between hosts"
  int64_t segment_bytes = 0;  ///< the MPI ring's segment size; 0 where no such ring ran
  std::vector<int64_t> bytes;
  std::vector<double> time_s;  ///< [ranks][sizes][iterations]
  std::vector<double> algbw_gbps, busbw_gbps;
  std::vector<int64_t> errors;  ///< elements that differed from the expected sum, per size
  int64_t run = 0;              ///< the /runs record of the run that measured it
};

inline const Field<AllreduceRecord> kAllreduceFields[] = {
    member<&AllreduceRecord::backend>("backend"),
    member<&AllreduceRecord::ranks>("ranks"),
    member<&AllreduceRecord::dtype>("dtype"),
    member<&AllreduceRecord::warmup>("warmup"),
    member<&AllreduceRecord::iterations>("iterations"),
    member<&AllreduceRecord::for_case>("case"),
    member<&AllreduceRecord::alpha_s>("alpha_s"),
    member<&AllreduceRecord::beta_s_per_byte>("beta_s_per_byte"),
    member<&AllreduceRecord::hosts>("hosts"),
    member<&AllreduceRecord::network>("network"),
    member<&AllreduceRecord::segment_bytes>("segment_bytes"),
    member<&AllreduceRecord::run>("run"),
};

inline const DatasetField<AllreduceRecord> kAllreduceDatasets[] = {
    vector_member<&AllreduceRecord::bytes>("bytes"),
    {"time_s",
     [](const AllreduceRecord& r, const char* name) {
       const auto sizes = static_cast<uint64_t>(r.bytes.size());
       return DatasetRecord{
           name, {static_cast<uint64_t>(r.ranks), sizes, static_cast<uint64_t>(r.iterations)}, r.time_s, {}, false};
     }},
    vector_member<&AllreduceRecord::algbw_gbps>("algbw_gbps"),
    vector_member<&AllreduceRecord::busbw_gbps>("busbw_gbps"),
    vector_member<&AllreduceRecord::errors>("errors"),
};

}  // namespace dlscale
