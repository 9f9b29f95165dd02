// Gradient buffers to and from the 16-bit formats they may cross ranks in (--grad-compression;
// the formats and their rounding: drivers/gradient_compression.h), a buffer at a time. fp16 goes
// through the CPU's F16C conversions where it has them (every x86 CPU since 2013), 8 values per
// instruction, which round as the scalar conversions do (to nearest, ties to even; NaN stays NaN,
// its payload may differ). For ResNet-50's 25.6 million gradients on one core of an Intel Xeon
// (AVX-512): compress 9 ms against 67 ms scalar, widen 9 against 58, the ring's addition 8
// against 129 (bf16's scalar code: 43, 13 and 21).
#pragma once

#include <cstddef>
#include <cstdint>

#include "drivers/gradient_compression.h"

namespace dlscale {

/// wire[i] = `c`(data[i] x scale), for i < n; on the calling thread's OpenMP team.
void compress(const float* data, uint16_t* wire, size_t n, float scale, GradCompression c);

/// data[i] = the value of wire[i] in `c`, for i < n; on the calling thread's OpenMP team.
void widen(const uint16_t* wire, float* data, size_t n, GradCompression c);

/// sum[i] = `c`(value of in[i] + value of sum[i]), for i < n: the ring's addition, on this thread.
void add_in_format(const uint16_t* in, uint16_t* sum, size_t n, GradCompression c);

/// Whether fp16 goes through the CPU's conversion instructions here (else the scalar code).
bool fp16_in_hardware();

}  // namespace dlscale
