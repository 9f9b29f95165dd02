// The data-set fuzz targets' one check: a data set read from fuzzed files is what dlscale trains
// on, or one std::invalid_argument naming the file and the problem.
#pragma once

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "suite/data/datasets.h"

namespace dlscale::fuzz {

/// open_dataset(`spec`), and a batch from its start and one across its end when it reads.
inline void read_dataset(const std::string& spec) {
  std::unique_ptr<Dataset> data;
  try {
    data = open_dataset(spec);
  } catch (const std::invalid_argument&) {
    return;
  }
  (void)data->batch(0, std::min<int64_t>(data->size(), 4));
  (void)data->batch(-1, 2);
}

}  // namespace dlscale::fuzz
