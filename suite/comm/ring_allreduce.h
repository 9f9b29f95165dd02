// dlscale's all-reduce of gradients over MPI: a ring of its own for buffers from 128 KiB, MPI_Allreduce below. MPI
// libraries choose their all-reduce algorithm by rules of their own, and those choices are not always the
// bandwidth-optimal one where gradients live: Open MPI 4.1's default took 8.9 s for 102 MB between four hosts at 200
// Mbit/s where its ring took 7.2 s (bench/allreduce_mechanisms.cpp); gloo, which PyTorch DDP runs on CPUs, runs a ring
// of its own for the same reason. A ring sends 2 (P-1)/P of the buffer over each rank's link whatever P is, the least
// any all-reduce can.
#pragma once

#include <mpi.h>

#include <cstddef>

namespace dlscale {

/// Buffers of at least this many bytes go round the ring; smaller ones, whose time is latency,
/// through MPI_Allreduce (recursive doubling and the like win there). Between two hosts, per
/// bucket of 4 MB of gradients (bench/shaped_link.py --mechanisms): at 500 Mbit/s the ring took
/// 0.90-1.00 of one whole all-reduce from 0.25 to 2 MB buckets where Open MPI 4.1's MPI_Allreduce
/// took 1.23-1.41, and both 0.84 at 0.125 MB; unshaped, the two were level from 0.064 to 1 MB.
constexpr size_t kRingMinBytes = size_t{128} << 10;
/// The ring's messages: each step's chunk goes in segments of this many bytes, each summed as it
/// arrives and passed on at once.
constexpr size_t kRingSegmentBytes = size_t{1} << 20;
/// Receives posted ahead of the one the ring waits for: what the left neighbour may send before
/// this rank has taken up the earlier ones.
constexpr size_t kRingSegmentsAhead = 4;

/// Sums `count` floats in place over `comm` (a collective: every rank with the same count). Round
/// the ring, the result is bit-identical on every rank: each chunk is summed once, on one rank,
/// in ring order, and the others receive that sum.
void allreduce_sum_in_place(float* data, size_t count, MPI_Comm comm);

}  // namespace dlscale
