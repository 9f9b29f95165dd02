// CIFAR-10's binary batches (`--data cifar10:DIR:test`): the input is test_batch.bin.
#include <cstdint>

#include "tests/fuzz/fuzz_datasets.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dlscale::fuzz::write_scratch("cifar10/test_batch.bin", data, size);
  dlscale::fuzz::read_dataset("cifar10:" + dlscale::fuzz::scratch_dir() + "/cifar10:test");
  return 0;
}
