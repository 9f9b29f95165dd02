// MNIST's IDX files (`--data mnist:DIR`): the input split into the images file and the labels
// file (the first 4 bytes, little-endian, give the images file's length).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "tests/fuzz/fuzz_datasets.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t split = 0;
  std::memcpy(&split, data, 4);
  const size_t images = std::min<size_t>(split, size - 4);
  dlscale::fuzz::write_scratch("mnist/train-images-idx3-ubyte", data + 4, images);
  dlscale::fuzz::write_scratch("mnist/train-labels-idx1-ubyte", data + 4 + images, size - 4 - images);
  dlscale::fuzz::read_dataset("mnist:" + dlscale::fuzz::scratch_dir() + "/mnist");
  return 0;
}
