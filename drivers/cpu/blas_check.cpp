// dlscale-blas-check LIBRARY: the child that checks BLAS kernels before a program selects them
// (blas_core_early.cpp). It loads LIBRARY, the BLAS the program runs on, in the environment its
// parent gave it (OPENBLAS_CORETYPE: the kernels to check, or none for the library's own choice),
// prints the core OpenBLAS runs (openblas_get_corename(); an empty line for another BLAS),
// computes C = A B with its sgemm_ (odd sizes, column-major) and compares it with the same
// product in float64. A program of its own, linking nothing but the C library: the check costs
// a few milliseconds, where starting the program itself again (LibTorch, CUDA) costs about a
// second, and kernels the CPU cannot run crash this process only.
//
// Exit code: 0 the product agrees within float32's error, 1 it disagrees, 2 no sgemm_ in
// LIBRARY, 3 LIBRARY does not load, 64 a wrong command line.
#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

using Sgemm = void (*)(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                       const int*, const float*, const int*, const float*, float*, const int*);

int check_product(Sgemm sgemm) {
  const int m = 193, n = 161, k = 227;
  std::vector<float> a(static_cast<size_t>(m) * k), b(static_cast<size_t>(k) * n), c(static_cast<size_t>(m) * n);
  uint64_t state = 0x9e3779b97f4a7c15ULL;
  const auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<float>(static_cast<double>(state >> 11) / 9007199254740992.0 * 2 - 1);
  };
  for (float& v : a) v = next();
  for (float& v : b) v = next();
  const float one = 1, zero = 0;
  sgemm("N", "N", &m, &n, &k, &one, a.data(), &m, b.data(), &k, &zero, c.data(), &m);
  double diff = 0, norm = 0;
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double want = 0;
      for (int p = 0; p < k; ++p)
        want += static_cast<double>(a[i + static_cast<size_t>(p) * m]) * b[p + static_cast<size_t>(j) * k];
      const double got = c[i + static_cast<size_t>(j) * m];
      diff += (got - want) * (got - want);
      norm += want * want;
    }
  }
  // Each element sums k products: float32 rounding leaves it within about sqrt(k) * 2^-24 of
  // float64 (relative, random signs); 10x k * 2^-24 is far above any right kernel and far below
  // what a wrong one (a transposed or skipped block) gives, which is of order 1.
  const double error = std::sqrt(diff / norm);
  return std::isfinite(error) && error < 10.0 * k * std::ldexp(1.0, -24) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 64;
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return 3;
  using CoreName = char* (*)();
  const auto core_name = reinterpret_cast<CoreName>(dlsym(library, "openblas_get_corename"));
  std::printf("%s\n", core_name != nullptr ? core_name() : "");
  std::fflush(stdout);
  const auto sgemm = reinterpret_cast<Sgemm>(dlsym(library, "sgemm_"));
  if (sgemm == nullptr) return 2;
  return check_product(sgemm);
}
