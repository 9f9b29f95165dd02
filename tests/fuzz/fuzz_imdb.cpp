// The IMDB reviews (`--data imdb:DIR`): the input is cut at its first two NUL bytes into the
// vocabulary (imdb.vocab), a negative and a positive review; a small vocabulary limit and
// sequence length keep the ids near their bounds.
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_datasets.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t first = input.find('\0');
  const size_t second = first == std::string::npos ? std::string::npos : input.find('\0', first + 1);
  const std::string vocab = input.substr(0, first);
  const std::string neg = first == std::string::npos ? "" : input.substr(first + 1, second - first - 1);
  const std::string pos = second == std::string::npos ? "" : input.substr(second + 1);
  dlscale::fuzz::write_scratch("imdb/imdb.vocab", vocab);
  dlscale::fuzz::write_scratch("imdb/train/neg/0_1.txt", neg);
  dlscale::fuzz::write_scratch("imdb/train/pos/0_9.txt", pos);
  dlscale::fuzz::read_dataset("imdb:" + dlscale::fuzz::scratch_dir() + "/imdb:vocab=8,seq=5");
  return 0;
}
