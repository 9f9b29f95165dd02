// dlscale's all-reduce of gradients over MPI: a ring of its own for buffers from 128 KiB, MPI_Allreduce below. MPI
// libraries choose their all-reduce algorithm by rules of their own, and those choices are not always the
// bandwidth-optimal one where gradients live: Open MPI 4.1's default took 8.9 s for 102 MB between four hosts at 200
// Mbit/s where its ring took 7.2 s (bench/allreduce_mechanisms.cpp); gloo, which PyTorch DDP runs on CPUs, runs a ring
// of its own for the same reason. A ring sends 2 (P-1)/P of the buffer over each rank's link whatever P is, the least
// any all-reduce can.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "drivers/gradient_compression.h"
#include "suite/comm/mpi_context.h"
#include "suite/matrix/placement.h"
#include "workloads/workload.h"

namespace dlscale {

/// Buffers of at least this many bytes go round the ring; smaller ones, whose time is latency,
/// through MPI_Allreduce (recursive doubling and the like win there). Between two hosts, per
/// bucket of 4 MB of gradients (bench/shaped_link.py --mechanisms): at 500 Mbit/s the ring took
/// 0.90-1.00 of one whole all-reduce from 0.25 to 2 MB buckets where Open MPI 4.1's MPI_Allreduce
/// took 1.23-1.41, and both 0.84 at 0.125 MB; unshaped, the two were level from 0.064 to 1 MB.
constexpr size_t kRingMinBytes = size_t{128} << 10;
/// The ring's messages: each step's chunk goes in segments, each summed as it arrives and passed
/// on at once. Of this many bytes at most, and fewer between hosts (ring_segment_bytes).
constexpr size_t kRingSegmentBytes = size_t{1} << 20;
/// The fewest bytes a segment carries, whatever MPI's eager limit: a floor, so that an MPI whose
/// eager limit is tiny (a few KiB) does not have the ring send and test a message per few KiB.
constexpr size_t kRingMinSegmentBytes = size_t{16} << 10;
/// What an MPI library's eager limit leaves to the payload: Open MPI 4.1.4's TCP transport sends
/// 65480 bytes eagerly under its default 65536 (its headers take the other 56).
constexpr size_t kEagerHeaderBytes = 64;
/// Receives posted ahead of the one the ring waits for, in bytes: what the left neighbour may
/// send before this rank has taken up the earlier ones (4 segments of 1 MiB, 64 of 64 KiB).
constexpr size_t kRingBytesAhead = size_t{4} << 20;
/// How many rings may be in flight at once on one communicator (RingSum's lanes).
constexpr int kRingLanes = 2;

/// The segment size, in bytes, of a ring whose ranks are all on one host (`spans_hosts` false)
/// or not, given the network transport's eager limit (mpi_tcp_eager_limit; 0: unknown). Between
/// hosts, segments stay under that limit, so that MPI sends each one at once: a larger one goes by
/// rendezvous, its payload only once the receiver's acknowledgement is back, and on a saturated
/// link that acknowledgement waits behind the data already queued in the receiver's own uplink,
/// leaving the sender's link idle meanwhile (LSTM-32 on four hosts at 200 Mbit/s: the bucketed
/// step took 2.50 s with 1 MiB segments, 2.37 s with 65472 bytes; 2.42 s with 80 KiB, just over
/// Open MPI's limit). Within one host, shared memory moves a large message in one copy, and the
/// segments stay at kRingSegmentBytes.
size_t ring_segment_bytes_for(bool spans_hosts, size_t eager_limit);

/// The segment size of every ring over `comm`: ring_segment_bytes_for this communicator, agreed
/// (the least) by its ranks, since a segment's sender and receiver must cut alike. Worked out on
/// the first call on a communicator, a collective (MPI_Comm_split_type, MPI_Allreduce), and kept
/// on it (an MPI attribute); later calls are local. Every rank makes its first call at the same
/// point: RingSum's constructor makes it, and BucketedAllreduce's, so that its thread never does.
size_t ring_segment_bytes(MPI_Comm comm);

/// A sum in flight, advanced by progress() until done() (RingSum, HostSum).
class InFlightSum {
 public:
  virtual ~InFlightSum() = default;
  /// Does what the messages that have arrived allow; returns whether anything moved.
  virtual bool progress() = 0;
  virtual bool done() const = 0;
};

/// What a ring does: the whole all-reduce; its first half alone, the reduce-scatter, after which
/// each rank holds the sum of its own chunk (ring_owned_chunk); or its second half alone, the
/// all-gather, which copies each rank's own chunk to every rank.
enum class RingPart { kAllReduce, kReduceScatter, kAllGather };

/// The chunk of a ring's `count` values over `ranks` that rank `rank` holds summed after the
/// reduce-scatter, and sends first in the all-gather: one of P nearly equal parts, the same for a
/// buffer too small for the ring (summed whole by MPI_Allreduce, all-gathered by MPI_Allgatherv).
ParamRange ring_owned_chunk(size_t count, size_t ranks, size_t rank);

/// One sum of `count` values in place over `comm`, in flight: round dlscale's ring, advanced by
/// progress() as its messages arrive, so that one thread can keep several in flight. The values
/// are floats, or with `wire` fp16 or bf16 (uint16_t bits, GradCompression): those are sent as
/// they are, and each partial sum is made in float and rounded back to the format, as DDP's
/// compression hooks have gloo and NCCL sum them. A collective: every rank starts the same sums,
/// with the same counts and format, in the same order; two in flight at once have different lanes
/// (0 <= lane < kRingLanes), which keep their messages and buffers apart. The result is
/// bit-identical on every rank: each chunk is summed once, on one rank, in ring order, and the
/// others receive that sum. A buffer under kRingMinBytes is summed by one MPI_Allreduce in the
/// constructor (done() at once). `part` runs half the ring (RingPart): a sharded optimiser
/// reduce-scatters the gradients and all-gathers the parameters it updated (all_gather()).
class RingSum final : public InFlightSum {
 public:
  RingSum(void* data, size_t count, GradCompression wire, MPI_Comm comm, int lane,
          RingPart part = RingPart::kAllReduce);
  /// The all-gather of `count` values of `value_bytes` bytes (4: float, 8: double): each rank's
  /// ring_owned_chunk copied to every rank, under kRingMinBytes by one MPI_Allgatherv.
  static std::unique_ptr<RingSum> all_gather(void* data, size_t count, size_t value_bytes, MPI_Comm comm, int lane);
  RingSum(const RingSum&) = delete;
  RingSum& operator=(const RingSum&) = delete;
  bool progress() override;
  bool done() const override { return done_; }
  /// Whether `count` values of `value_bytes` bytes over `ranks` ranks go round the ring (else
  /// one MPI call, or nothing on one rank).
  static bool goes_round(size_t count, size_t value_bytes, size_t ranks) {
    return ranks > 1 && count * value_bytes >= kRingMinBytes && count >= ranks;
  }

 private:
  struct Span {
    char* data;
    size_t count;  // values
  };
  struct Message {
    size_t step, segment;
    char* target;  // where it ends up in the buffer
    size_t count;  // values
  };
  struct Scratch;

  RingSum(void* data, size_t count, size_t value_bytes, GradCompression wire, MPI_Comm comm, int lane, RingPart part);
  bool reducing(size_t step) const { return step + 1 < p_; }
  Span chunk(size_t c) const;
  size_t received(size_t step) const;
  char* slot(size_t m) const;
  size_t send_index(size_t step, size_t segment) const;
  void send(const char* from, size_t n, MPI_Request& request);
  bool post_receive(size_t m);

  char* data_;
  size_t count_;
  GradCompression wire_;  // the sum's format (kNone for an all-gather)
  size_t value_bytes_;    // wire_bytes(wire_), or an all-gather's
  MPI_Datatype type_;     // MPI_FLOAT, MPI_UINT16_T for the 16-bit formats, MPI_DOUBLE
  MPI_Comm comm_;
  size_t segment_ = 0;  // values per segment (ring_segment_bytes)
  size_t ahead_ = 0;    // receives posted ahead (kRingBytesAhead)
  int tag_;
  size_t p_ = 1, r_ = 0;
  RingPart part_ = RingPart::kAllReduce;
  size_t first_step_ = 0, end_step_ = 0;  // the steps it runs: [first_step_, end_step_) of 2 (P - 1)
  int left_ = 0, right_ = 0;
  Scratch* scratch_ = nullptr;
  std::vector<Message> messages_;    // the receive order
  std::vector<size_t> step_first_;   // per step, its first message's index in the receive order
  size_t first_send_ = 0;            // step 0's segments, sent before any receive
  size_t posted_ = 0, arrived_ = 0;  // receives posted, and taken up, in the receive order
  bool done_ = false;
};

/// The communicators of a hierarchical sum over `comm`: per ring lane one of the ranks on this
/// rank's host (MPI_Comm_split_type), whose rank 0 is its host's leader, and the leaders' own
/// (MPI_COMM_NULL on the other ranks). Made on the first call on a communicator, a collective, and
/// kept on it (an MPI attribute, freed with it); later calls are local. Every rank makes its first
/// call at the same point (BucketedAllreduce's constructor, the step's first blocking sum).
struct HostGroups {
  std::vector<Communicator> host;  ///< [lane]: this host's ranks, one communicator per lane
  Communicator leaders;            ///< MPI_COMM_NULL on the ranks that do not lead a host
  int hosts = 1;
};
const HostGroups& host_groups(MPI_Comm comm);

/// One sum over `comm` as `Hierarchy::kHost` makes it: MPI_Ireduce to the host's leader, a
/// RingSum of the leaders, MPI_Ibcast within the host; bit-identical on every rank, as the ring's.
/// The same collective rules as RingSum's; each lane has communicators of its own, so that two in
/// flight never interleave their nonblocking collectives differently on two ranks.
class HostSum final : public InFlightSum {
 public:
  HostSum(void* data, size_t count, GradCompression wire, MPI_Comm comm, int lane);
  HostSum(const HostSum&) = delete;
  HostSum& operator=(const HostSum&) = delete;
  bool progress() override;
  bool done() const override { return stage_ == Stage::kDone; }

 private:
  enum class Stage { kReduce, kRing, kBroadcast, kDone };
  void broadcast();
  void* data_;
  int count_;
  GradCompression wire_;
  const HostGroups& groups_;
  int lane_;
  Stage stage_ = Stage::kReduce;
  MPI_Request request_ = MPI_REQUEST_NULL;
  std::unique_ptr<RingSum> ring_;
};

/// The sum of `count` values of `wire` over `comm` as `hierarchy` makes it, in flight: a RingSum,
/// or for Hierarchy::kHost a HostSum (a flat ring where the buffer is too large for one MPI call,
/// over INT_MAX values).
std::unique_ptr<InFlightSum> start_sum(void* data, size_t count, GradCompression wire, MPI_Comm comm, int lane,
                                       Hierarchy hierarchy);

/// How a thread that advances RingSums waits between two attempts, without holding a core for
/// long: MPI's own waits poll it flat out, which on a node whose cores all compute (the
/// communication thread beside backward's threads) takes a share of them from backward for as
/// long as the network takes. After an attempt that moved nothing it polls for a while, then
/// sleeps between attempts, 10 us at first and twice as long each time up to 200 us, so that a
/// message that arrives costs at most that much more. How long it polls follows the previous
/// spell between two moves: after a short one, 1 ms, because polling only 50 us made the ring
/// 1.4-6x MPI_Allreduce's time for 64-512 KB buckets on an unshaped link between two hosts (each
/// sleep outlasts such a transfer, and no rank moves data while it sleeps); after one of more than
/// 2 ms the link is what the ring waits for, the next message is as far off, and polling would
/// only take that core from backward (1 ms of every 8 for 1 MiB segments at 1 Gbit/s).
class Pacer {
 public:
  /// After an attempt: whether it moved anything. Returns at once, or after a sleep.
  void after(bool moved);

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point idle_since_{};  // the first attempt that moved nothing since the last move
  bool idle_ = false;
  Clock::duration last_spell_{};  // from the previous idle spell's start to the move that ended it
  std::chrono::microseconds pause_{10};
};

/// Sums `count` values of `wire` in place over `comm` (a collective: every rank with the same count,
/// format and hierarchy) and waits for it: one start_sum() on lane 0, advanced until done (paced by
/// a Pacer).
void allreduce_sum_in_place(void* data, size_t count, GradCompression wire, MPI_Comm comm,
                            Hierarchy hierarchy = Hierarchy::kFlat);

}  // namespace dlscale
