// A case's gradient noise scale (docs/schema.md, "noise_scale"; suite/meters/noise_scale.h
// estimates it): the estimate's attributes, and the definition the group carries with them.
#pragma once

#include <cstdint>

#include "schema/fields.h"

namespace dlscale {

struct NoiseScale {
  double batch_small = 0, batch_big = 0;  ///< the samples behind the two gradients
  double grad_sq = 0;                     ///< |G|², the mean of the steps' unbiased estimates
  double trace = 0;                       ///< tr(Σ), likewise
  double simple = 0;                      ///< B_simple = trace / grad_sq; NaN where grad_sq <= 0
  double ci95_low = 0, ci95_high = 0;     ///< simple -+ 1.96 jackknife standard errors over steps
  int64_t steps = 0;
};

/// What the group's `definition` attribute says.
inline constexpr const char* kNoiseScaleDefinition =
    "simple noise scale B_simple = tr(Sigma) / |G|^2 (McCandlish et al. 2018, Appendix A.1), from each step's "
    "squared norms of the gradients of batch_small samples (each rank's micro-batches before the average; "
    "small_sq, their mean) and of the averaged gradient of batch_big samples (big_sq): |G|^2 = (B_big big - "
    "B_small small) / (B_big - B_small), tr(Sigma) = (small - big) / (1/B_small - 1/B_big), each averaged over "
    "the steps before their ratio; ci95: jackknife over steps";

inline const Field<NoiseScale> kNoiseScaleFields[] = {
    member<&NoiseScale::batch_small>("batch_small"), member<&NoiseScale::batch_big>("batch_big"),
    member<&NoiseScale::grad_sq>("grad_sq"),         member<&NoiseScale::trace>("trace"),
    member<&NoiseScale::simple>("simple"),           member<&NoiseScale::ci95_low>("ci95_low"),
    member<&NoiseScale::ci95_high>("ci95_high"),     member<&NoiseScale::steps>("steps"),
};

}  // namespace dlscale
