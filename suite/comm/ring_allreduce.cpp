#include "suite/comm/ring_allreduce.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <thread>
#include <vector>

#include "suite/comm/mpi_context.h"
#include "suite/comm/mpi_settings.h"
#include "suite/comm/wire_format.h"
#include "suite/errors.h"

namespace dlscale {

namespace {

constexpr int kTag = 0x6c72;  // the ring's messages on the caller's communicator, plus the lane

/// Chunk c of a ring's `count` values over `ranks`: [first(c), first(c + 1)), P nearly equal parts.
ParamRange ring_chunk(size_t count, size_t ranks, size_t c) {
  const auto first = [&](size_t i) { return count / ranks * i + std::min(i, count % ranks); };
  return {first(c), first(c + 1) - first(c)};
}

/// `in` added into `target`, `n` values of `wire`.
void add_into(char* target, const char* in, size_t n, GradCompression wire) {
  if (wire != GradCompression::kNone) {
    add_in_format(reinterpret_cast<const uint16_t*>(in), reinterpret_cast<uint16_t*>(target), n, wire);
    return;
  }
  float* t = reinterpret_cast<float*>(target);
  const float* x = reinterpret_cast<const float*>(in);
  for (size_t i = 0; i < n; ++i) t[i] += x[i];
}

/// MPI's reduction for a 16-bit format: the same sum as the ring's (add_into).
template <GradCompression Wire>
void sixteen_bit_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  add_into(static_cast<char*>(inout), static_cast<const char*>(in), static_cast<size_t>(*len), Wire);
}

/// The two 16-bit sums as MPI operations, made on the first small 16-bit sum. They are freed here
/// while MPI is still running; at the process's end, after MPI_Finalize, MPI has freed them itself.
class SixteenBitSums {
 public:
  SixteenBitSums() {
    DLSCALE_CHECK_MPI(MPI_Op_create(&sixteen_bit_sum<GradCompression::kFp16>, 1, &fp16_));
    DLSCALE_CHECK_MPI(MPI_Op_create(&sixteen_bit_sum<GradCompression::kBf16>, 1, &bf16_));
  }
  ~SixteenBitSums() {
    int finalized = 1;
    if (MPI_Finalized(&finalized) != MPI_SUCCESS || finalized) return;
    MPI_Op_free(&fp16_);
    MPI_Op_free(&bf16_);
  }
  SixteenBitSums(const SixteenBitSums&) = delete;
  SixteenBitSums& operator=(const SixteenBitSums&) = delete;
  MPI_Op of(GradCompression wire) const { return wire == GradCompression::kFp16 ? fp16_ : bf16_; }

 private:
  MPI_Op fp16_ = MPI_OP_NULL, bf16_ = MPI_OP_NULL;
};

/// The sum of `wire` as an MPI operation (MPI_SUM for floats).
MPI_Op sum_of(GradCompression wire) {
  if (wire == GradCompression::kNone) return MPI_SUM;
  static const SixteenBitSums sums;  // made on the first call that needs them, after MPI_Init
  return sums.of(wire);
}

/// The MPI datatype of values of `bytes` bytes: the 16-bit formats' bits, float, double.
MPI_Datatype value_type(size_t bytes) {
  if (bytes == 2) return MPI_UINT16_T;
  return bytes == 8 ? MPI_DOUBLE : MPI_FLOAT;
}

/// Every rank's owned chunk (ring_owned_chunk) of `count` values of `bytes` bytes, copied to every
/// rank by one MPI_Allgatherv in place: the all-gather of a buffer too small for the ring.
void mpi_allgather_owned(char* data, size_t count, size_t bytes, MPI_Comm comm) {
  int size = 1;
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &size));
  std::vector<int> counts(static_cast<size_t>(size)), displacements(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) {
    const ParamRange own = ring_owned_chunk(count, counts.size(), i);
    counts[i] = static_cast<int>(own.count);
    displacements[i] = static_cast<int>(own.first);
  }
  DLSCALE_CHECK_MPI(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts.data(), displacements.data(),
                                   value_type(bytes), comm));
}

void mpi_allreduce_in_place(char* data, size_t count, GradCompression wire, MPI_Comm comm) {
  const size_t value_bytes = static_cast<size_t>(wire_bytes(wire));
  const MPI_Datatype type = value_type(value_bytes);
  for (size_t done = 0; done < count;) {
    const size_t n = std::min<size_t>(count - done, INT_MAX);
    DLSCALE_CHECK_MPI(
        MPI_Allreduce(MPI_IN_PLACE, data + done * value_bytes, static_cast<int>(n), type, sum_of(wire), comm));
    done += n;
  }
}

/// The key of ring_segment_bytes's value on a communicator; not copied by MPI_Comm_dup (a copy
/// works it out again).
int segment_keyval() {
  static const int keyval = [] {
    int k = MPI_KEYVAL_INVALID;
    DLSCALE_CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k, nullptr));
    return k;
  }();
  return keyval;
}

}  // namespace

namespace {

/// Frees a communicator's HostGroups with it (its communicators with them).
int free_host_groups(MPI_Comm, int, void* value, void*) {
  delete static_cast<HostGroups*>(value);
  return MPI_SUCCESS;
}

int host_groups_keyval() {
  static const int keyval = [] {
    int k = MPI_KEYVAL_INVALID;
    DLSCALE_CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &free_host_groups, &k, nullptr));
    return k;
  }();
  return keyval;
}

}  // namespace

const HostGroups& host_groups(MPI_Comm comm) {
  void* value = nullptr;
  int found = 0;
  DLSCALE_CHECK_MPI(MPI_Comm_get_attr(comm, host_groups_keyval(), &value, &found));
  if (found) return *static_cast<const HostGroups*>(value);
  auto groups = std::make_unique<HostGroups>();
  MPI_Comm host = MPI_COMM_NULL;
  DLSCALE_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host));
  groups->host.emplace_back(host);
  for (int lane = 1; lane < kRingLanes; ++lane) {
    MPI_Comm copy = MPI_COMM_NULL;
    DLSCALE_CHECK_MPI(MPI_Comm_dup(host, &copy));
    groups->host.emplace_back(copy);
  }
  int host_rank = 0;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(host, &host_rank));
  MPI_Comm leaders = MPI_COMM_NULL;
  DLSCALE_CHECK_MPI(MPI_Comm_split(comm, host_rank == 0 ? 0 : MPI_UNDEFINED, 0, &leaders));
  groups->leaders = Communicator(leaders);
  int leads = host_rank == 0 ? 1 : 0;
  DLSCALE_CHECK_MPI(MPI_Allreduce(&leads, &groups->hosts, 1, MPI_INT, MPI_SUM, comm));
  // The leaders' rings cut their segments for the network: agreed now, by every leader at once.
  if (leaders != MPI_COMM_NULL) ring_segment_bytes(leaders);
  DLSCALE_CHECK_MPI(MPI_Comm_set_attr(comm, host_groups_keyval(), groups.get()));
  return *groups.release();
}

size_t ring_segment_bytes_for(bool spans_hosts, size_t eager_limit) {
  if (!spans_hosts || eager_limit == 0) return kRingSegmentBytes;
  const size_t payload = eager_limit > kEagerHeaderBytes ? eager_limit - kEagerHeaderBytes : 0;
  return std::clamp(payload / sizeof(float) * sizeof(float), kRingMinSegmentBytes, kRingSegmentBytes);
}

size_t ring_segment_bytes(MPI_Comm comm) {
  void* value = nullptr;
  int found = 0;
  DLSCALE_CHECK_MPI(MPI_Comm_get_attr(comm, segment_keyval(), &value, &found));
  if (found) return static_cast<size_t>(reinterpret_cast<uintptr_t>(value));
  int size = 1;
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &size));
  MPI_Comm node_comm = MPI_COMM_NULL;
  DLSCALE_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_comm));
  const Communicator node(node_comm);
  int node_size = 1;
  DLSCALE_CHECK_MPI(MPI_Comm_size(node.get(), &node_size));
  unsigned long long bytes = ring_segment_bytes_for(node_size < size, mpi_tcp_eager_limit());
  DLSCALE_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, comm));
  // The value itself is the attribute: nothing to free when the communicator goes.
  DLSCALE_CHECK_MPI(MPI_Comm_set_attr(comm, segment_keyval(), reinterpret_cast<void*>(static_cast<uintptr_t>(bytes))));
  return static_cast<size_t>(bytes);
}

void Pacer::after(bool moved) {
  const Clock::time_point now = Clock::now();
  if (moved) {
    if (idle_) last_spell_ = now - idle_since_;
    idle_ = false;
    return;
  }
  if (!idle_) {
    idle_ = true;
    idle_since_ = now;
    pause_ = std::chrono::microseconds(10);
  }
  const auto poll =
      last_spell_ > std::chrono::milliseconds(2) ? std::chrono::microseconds(50) : std::chrono::microseconds(1000);
  if (now < idle_since_ + poll) return;
  std::this_thread::sleep_for(pause_);
  pause_ = std::min(2 * pause_, std::chrono::microseconds(200));
}

/// What a ring receives reduce-scatter segments into and its requests, kept per thread and lane
/// from one sum to the next: a fresh buffer per bucket would cost an allocation and its page
/// faults every step.
struct RingSum::Scratch {
  std::vector<float> slots;                  // kRingBytesAhead of segments (floats: aligned for either format)
  std::vector<MPI_Request> receives, sends;  // one per message, in ring order
};

// The ring's schedule as one pipeline of messages. Step s (0 <= s < 2(P-1)) sends one chunk to the
// right neighbour and receives another from the left, cut into segments (ring_segment_bytes); the
// first P-1 steps add what they receive (reduce-scatter), the rest store it (all-gather). What
// step s + 1 sends is exactly what step s received, so segment k of step s + 1 leaves as soon as
// segment k of step s has arrived (and been added), not when the whole of step s has: a ring whose
// steps wait for each other leaves the link idle at every step's end for as long as its last
// segment takes to arrive and the next one's rendezvous to cross back, which on 4 hosts at
// 200 Mbit/s made a 24.7 MB all-reduce 1.04x gloo's (whose ring is pipelined this way).
ParamRange ring_owned_chunk(size_t count, size_t ranks, size_t rank) {
  return ring_chunk(count, ranks, (rank + 1) % ranks);
}

RingSum::RingSum(void* data, size_t count, GradCompression wire, MPI_Comm comm, int lane, RingPart part)
    : RingSum(data, count, static_cast<size_t>(wire_bytes(wire)), wire, comm, lane, part) {}

std::unique_ptr<RingSum> RingSum::all_gather(void* data, size_t count, size_t value_bytes, MPI_Comm comm, int lane) {
  return std::unique_ptr<RingSum>(
      new RingSum(data, count, value_bytes, GradCompression::kNone, comm, lane, RingPart::kAllGather));
}

RingSum::RingSum(void* data, size_t count, size_t value_bytes, GradCompression wire, MPI_Comm comm, int lane,
                 RingPart part)
    : data_(static_cast<char*>(data)),
      count_(count),
      wire_(wire),
      value_bytes_(value_bytes),
      type_(value_type(value_bytes)),
      comm_(comm),
      tag_(kTag + lane) {
  int size = 1, rank = 0;
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &size));
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  p_ = static_cast<size_t>(size);
  r_ = static_cast<size_t>(rank);
  part_ = part;
  // The reduce-scatter is the first P - 1 steps, the all-gather the rest.
  first_step_ = part == RingPart::kAllGather ? p_ - 1 : 0;
  end_step_ = part == RingPart::kReduceScatter ? p_ - 1 : 2 * (p_ - 1);
  if (!goes_round(count, value_bytes, p_)) {
    // One MPI call: a sum leaves the whole sum everywhere, the owned chunks among it.
    if (p_ > 1 && part == RingPart::kAllGather) mpi_allgather_owned(data_, count, value_bytes, comm);
    if (p_ > 1 && part != RingPart::kAllGather) mpi_allreduce_in_place(data_, count, wire, comm);
    done_ = true;
    return;
  }
  segment_ = ring_segment_bytes(comm) / value_bytes_;
  ahead_ = std::max<size_t>(1, kRingBytesAhead / (segment_ * value_bytes_));
  thread_local Scratch lanes[kRingLanes];
  scratch_ = &lanes[lane];
  left_ = (rank + size - 1) % size;
  right_ = (rank + 1) % size;
  // Message m of the receive order is segment k of step s; send i of step s + 1 is receive i of
  // step s, so the sends' order is the first step's segments, then the receives' order shifted by
  // a step.
  for (size_t s = first_step_; s < end_step_; ++s) {
    step_first_.push_back(messages_.size());
    const Span c = chunk(received(s));
    for (size_t k = 0; k * segment_ < c.count; ++k)
      messages_.push_back({s, k, c.data + k * segment_ * value_bytes_, std::min(segment_, c.count - k * segment_)});
  }
  // The first step sends this rank's own chunk: its gradients, or for the all-gather its sum.
  const Span own = chunk(part == RingPart::kAllGather ? (r_ + 1) % p_ : r_);
  first_send_ = (own.count + segment_ - 1) / segment_;
  scratch_->receives.assign(messages_.size(), MPI_REQUEST_NULL);
  scratch_->sends.assign(first_send_ + messages_.size(), MPI_REQUEST_NULL);
  const size_t slot_floats = (ahead_ * segment_ * value_bytes_ + sizeof(float) - 1) / sizeof(float);
  if (scratch_->slots.size() < slot_floats) scratch_->slots.resize(slot_floats);
  for (size_t k = 0; k < first_send_; ++k) {
    const size_t at = k * segment_;
    send(own.data + at * value_bytes_, std::min(segment_, own.count - at), scratch_->sends[k]);
  }
  progress();
}

bool RingSum::progress() {
  if (done_) return false;
  bool moved = false;
  std::vector<MPI_Request>& receives = scratch_->receives;
  while (true) {
    while (posted_ < messages_.size() && posted_ < arrived_ + ahead_ && post_receive(posted_)) {
      ++posted_;
      moved = true;
    }
    if (arrived_ == posted_) break;
    int arrived = 0;
    DLSCALE_CHECK_MPI(MPI_Test(&receives[arrived_], &arrived, MPI_STATUS_IGNORE));
    if (!arrived) break;
    const Message& got = messages_[arrived_];
    if (reducing(got.step)) add_into(got.target, slot(arrived_), got.count, wire_);
    if (got.step + 1 < end_step_) send(got.target, got.count, scratch_->sends[first_send_ + arrived_]);
    ++arrived_;
    moved = true;
  }
  if (arrived_ == messages_.size()) {
    int sent = 0;
    std::vector<MPI_Request>& sends = scratch_->sends;
    DLSCALE_CHECK_MPI(MPI_Testall(static_cast<int>(sends.size()), sends.data(), &sent, MPI_STATUSES_IGNORE));
    done_ = sent != 0;
    moved = moved || done_;
  }
  return moved;
}

RingSum::Span RingSum::chunk(size_t c) const {
  const ParamRange part = ring_chunk(count_, p_, c);
  return {data_ + part.first * value_bytes_, part.count};
}

/// The chunk step s receives: during the reduce-scatter r - s - 1, which this rank holds summed
/// after step P - 2 (chunk r + 1); during the all-gather the sums, chunk r - j at its step j.
size_t RingSum::received(size_t s) const {
  return reducing(s) ? (r_ + 2 * p_ - s - 1) % p_ : (r_ + 2 * p_ - (s - (p_ - 1))) % p_;
}

char* RingSum::slot(size_t m) const {
  return reinterpret_cast<char*>(scratch_->slots.data()) + (m % ahead_) * segment_ * value_bytes_;
}

/// Where segment k of step s is in the sends' order.
size_t RingSum::send_index(size_t s, size_t k) const {
  return s == first_step_ ? k : first_send_ + step_first_[s - 1 - first_step_] + k;
}

void RingSum::send(const char* from, size_t n, MPI_Request& request) {
  DLSCALE_CHECK_MPI(MPI_Isend(from, static_cast<int>(n), type_, right_, tag_, comm_, &request));
}

/// Receive m goes to its slot to be added, or, during the all-gather, straight into the buffer.
/// There, in a whole all-reduce, it overwrites what this rank sent of the same chunk during the
/// reduce-scatter (step j sends chunk r - j, all-gather step j receives it), so that send must have
/// completed first; it has in practice, long since: the sum that arrives was made from it. (An
/// all-gather alone receives only chunks it has not sent.) Returns whether it posted.
bool RingSum::post_receive(size_t m) {
  const Message& msg = messages_[m];
  char* into = msg.target;
  if (reducing(msg.step)) {
    into = slot(m);
  } else if (part_ == RingPart::kAllReduce) {
    int sent = 0;
    MPI_Request& overwritten = scratch_->sends[send_index(msg.step - (p_ - 1), msg.segment)];
    DLSCALE_CHECK_MPI(MPI_Test(&overwritten, &sent, MPI_STATUS_IGNORE));
    if (!sent) return false;
  }
  DLSCALE_CHECK_MPI(MPI_Irecv(into, static_cast<int>(msg.count), type_, left_, tag_, comm_, &scratch_->receives[m]));
  return true;
}

HostSum::HostSum(void* data, size_t count, GradCompression wire, MPI_Comm comm, int lane)
    : data_(data), count_(static_cast<int>(count)), wire_(wire), groups_(host_groups(comm)), lane_(lane) {
  const MPI_Comm host = groups_.host[static_cast<size_t>(lane)].get();
  int host_rank = 0;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(host, &host_rank));
  const MPI_Datatype type = wire == GradCompression::kNone ? MPI_FLOAT : MPI_UINT16_T;
  // In place at the leader (host rank 0); the others send theirs.
  DLSCALE_CHECK_MPI(MPI_Ireduce(host_rank == 0 ? MPI_IN_PLACE : data, host_rank == 0 ? data : nullptr, count_, type,
                                sum_of(wire), 0, host, &request_));
  progress();
}

bool HostSum::progress() {
  bool moved = false;
  if (stage_ == Stage::kReduce) {
    int finished = 0;
    DLSCALE_CHECK_MPI(MPI_Test(&request_, &finished, MPI_STATUS_IGNORE));
    if (!finished) return false;
    moved = true;
    if (groups_.leaders.get() != MPI_COMM_NULL) {
      ring_ = std::make_unique<RingSum>(data_, static_cast<size_t>(count_), wire_, groups_.leaders.get(), lane_);
      stage_ = Stage::kRing;
    } else {
      broadcast();
    }
  }
  if (stage_ == Stage::kRing) {
    moved = ring_->progress() || moved;
    if (!ring_->done()) return moved;
    ring_.reset();
    broadcast();
    moved = true;
  }
  if (stage_ == Stage::kBroadcast) {
    int finished = 0;
    DLSCALE_CHECK_MPI(MPI_Test(&request_, &finished, MPI_STATUS_IGNORE));
    if (finished) {
      stage_ = Stage::kDone;
      moved = true;
    }
  }
  return moved;
}

void HostSum::broadcast() {
  const MPI_Datatype type = wire_ == GradCompression::kNone ? MPI_FLOAT : MPI_UINT16_T;
  DLSCALE_CHECK_MPI(MPI_Ibcast(data_, count_, type, 0, groups_.host[static_cast<size_t>(lane_)].get(), &request_));
  stage_ = Stage::kBroadcast;
}

std::unique_ptr<InFlightSum> start_sum(void* data, size_t count, GradCompression wire, MPI_Comm comm, int lane,
                                       Hierarchy hierarchy) {
  if (hierarchy == Hierarchy::kHost && count <= static_cast<size_t>(INT_MAX)) {
    return std::make_unique<HostSum>(data, count, wire, comm, lane);
  }
  return std::make_unique<RingSum>(data, count, wire, comm, lane);
}

void allreduce_sum_in_place(void* data, size_t count, GradCompression wire, MPI_Comm comm, Hierarchy hierarchy) {
  thread_local Pacer pacer;
  const std::unique_ptr<InFlightSum> sum = start_sum(data, count, wire, comm, 0, hierarchy);
  while (!sum->done()) pacer.after(sum->progress());
}

}  // namespace dlscale
