#include "suite/comm/ring_allreduce.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <thread>
#include <vector>

#include "suite/errors.h"

namespace dlscale {

namespace {

constexpr size_t kSegment = kRingSegmentBytes / sizeof(float);
constexpr int kTag = 0x6c72;  // the ring's messages on the caller's communicator

/// Waits for `count` requests without holding a core for long: MPI's own waits poll it flat out,
/// which on a node whose cores all compute (the communication thread beside backward's threads)
/// takes a share of them from backward for as long as the network takes. Polls for a while, then
/// sleeps between polls, 10 us at first and twice as long each time up to 200 us, so that a
/// message that arrives costs at most that much more. How long it polls follows the previous wait
/// on this thread (`last_wait`): after a short one, 1 ms, because polling only 50 us made the ring
/// 1.4-6x MPI_Allreduce's time for 64-512 KB buckets on an unshaped link between two hosts (each
/// sleep outlasts such a transfer, and no rank moves data while it sleeps); after one of more than
/// 2 ms the link is what the ring waits for, the next segment is as far off, and polling would
/// only take that core from backward (1 ms of every 8 for 1 MiB segments at 1 Gbit/s).
void wait_all(int count, MPI_Request* requests, std::chrono::steady_clock::duration& last_wait) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const auto poll =
      last_wait > std::chrono::milliseconds(2) ? std::chrono::microseconds(50) : std::chrono::microseconds(1000);
  auto pause = std::chrono::microseconds(10);
  while (true) {
    int done = 0;
    DLSCALE_CHECK_MPI(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE));
    const Clock::time_point now = Clock::now();
    if (done) {
      last_wait = now - start;
      return;
    }
    if (now < start + poll) continue;
    std::this_thread::sleep_for(pause);
    pause = std::min(2 * pause, std::chrono::microseconds(200));
  }
}

/// What the ring receives reduce-scatter segments into, kept per thread from one all-reduce to the
/// next: a fresh buffer per bucket would cost an allocation and its page faults every step.
struct RingScratch {
  std::vector<float> slots;                         // kRingSegmentsAhead segments
  std::vector<MPI_Request> receives, sends;         // one per message, in ring order
  std::chrono::steady_clock::duration last_wait{};  // how long the previous wait took (wait_all)
};

RingScratch& ring_scratch() {
  thread_local RingScratch scratch;
  return scratch;
}

/// The ring's schedule as one pipeline of messages. Step s (0 <= s < 2(P-1)) sends one chunk to
/// the right neighbour and receives another from the left, cut into segments of kSegment floats;
/// the first P-1 steps add what they receive (reduce-scatter), the rest store it (all-gather).
/// What step s + 1 sends is exactly what step s received, so segment k of step s + 1 leaves as soon
/// as segment k of step s has arrived (and been added), not when the whole of step s has: a ring
/// whose steps wait for each other leaves the link idle at every step's end for as long as its
/// last segment takes to arrive and the next one's rendezvous to cross back, which on 4 hosts at
/// 200 Mbit/s made a 24.7 MB all-reduce 1.04x gloo's (whose ring is pipelined this way).
class Ring {
 public:
  Ring(float* data, size_t count, MPI_Comm comm, int rank, int size)
      : data_(data),
        count_(count),
        comm_(comm),
        p_(static_cast<size_t>(size)),
        r_(static_cast<size_t>(rank)),
        left_((rank + size - 1) % size),
        right_((rank + 1) % size) {
    // Message m of the receive order is segment k of step s; send i of step s + 1 is receive i of
    // step s, so the sends' order is step 0's segments, then the receives' order shifted by a step.
    for (size_t s = 0; s < steps(); ++s) {
      step_first_.push_back(messages_.size());
      const Span c = chunk(received(s));
      for (size_t k = 0; k * kSegment < c.count; ++k)
        messages_.push_back({s, k, c.data + k * kSegment, std::min(kSegment, c.count - k * kSegment)});
    }
    first_send_ = segments(chunk(r_));
  }

  void run() {
    std::vector<MPI_Request>& receives = scratch_.receives;
    std::vector<MPI_Request>& sends = scratch_.sends;
    receives.assign(messages_.size(), MPI_REQUEST_NULL);
    sends.assign(first_send_ + messages_.size(), MPI_REQUEST_NULL);
    if (scratch_.slots.size() < kRingSegmentsAhead * kSegment) scratch_.slots.resize(kRingSegmentsAhead * kSegment);
    const Span own = chunk(r_);
    for (size_t k = 0; k < first_send_; ++k) {
      const size_t at = k * kSegment;
      send(own.data + at, std::min(kSegment, own.count - at), sends[k]);
    }
    for (size_t m = 0; m < std::min(kRingSegmentsAhead, messages_.size()); ++m) post_receive(m);
    for (size_t m = 0; m < messages_.size(); ++m) {
      const Message& got = messages_[m];
      wait_all(1, &receives[m], scratch_.last_wait);
      if (reducing(got.step)) {
        const float* in = slot(m);
        for (size_t i = 0; i < got.count; ++i) got.target[i] += in[i];
      }
      if (got.step + 1 < steps()) send(got.target, got.count, sends[first_send_ + m]);
      if (m + kRingSegmentsAhead < messages_.size()) post_receive(m + kRingSegmentsAhead);
    }
    wait_all(static_cast<int>(sends.size()), sends.data(), scratch_.last_wait);
  }

 private:
  struct Span {
    float* data;
    size_t count;
  };
  struct Message {
    size_t step, segment;
    float* target;  // where it ends up in the buffer
    size_t count;
  };

  size_t steps() const { return 2 * (p_ - 1); }
  bool reducing(size_t step) const { return step + 1 < p_; }
  /// Chunk c is [first(c), first(c + 1)): P nearly equal parts.
  Span chunk(size_t c) const {
    const auto first = [&](size_t i) { return count_ / p_ * i + std::min(i, count_ % p_); };
    return {data_ + first(c), first(c + 1) - first(c)};
  }
  static size_t segments(Span c) { return (c.count + kSegment - 1) / kSegment; }
  /// The chunk step s receives: during the reduce-scatter r - s - 1, which this rank holds summed
  /// after step P - 2 (chunk r + 1); during the all-gather the sums, chunk r - j at its step j.
  size_t received(size_t s) const {
    return reducing(s) ? (r_ + 2 * p_ - s - 1) % p_ : (r_ + 2 * p_ - (s - (p_ - 1))) % p_;
  }
  float* slot(size_t m) { return scratch_.slots.data() + (m % kRingSegmentsAhead) * kSegment; }

  void send(const float* from, size_t n, MPI_Request& request) {
    DLSCALE_CHECK_MPI(MPI_Isend(from, static_cast<int>(n), MPI_FLOAT, right_, kTag, comm_, &request));
  }
  /// Receive m goes to its slot to be added, or, during the all-gather, straight into the buffer.
  /// There it overwrites what this rank sent of the same chunk during the reduce-scatter (step j
  /// sends chunk r - j, all-gather step j receives it), so that send must have completed; it has
  /// in practice, long since: the sum that arrives was made from it.
  void post_receive(size_t m) {
    const Message& msg = messages_[m];
    float* into = msg.target;
    if (reducing(msg.step)) {
      into = slot(m);
    } else {
      std::chrono::steady_clock::duration sent_wait{};  // not the link's pace: kept out of last_wait
      wait_all(1, &scratch_.sends[send_index(msg.step - (p_ - 1), msg.segment)], sent_wait);
    }
    DLSCALE_CHECK_MPI(
        MPI_Irecv(into, static_cast<int>(msg.count), MPI_FLOAT, left_, kTag, comm_, &scratch_.receives[m]));
  }
  /// Where segment k of step s is in the sends' order.
  size_t send_index(size_t s, size_t k) const { return s == 0 ? k : first_send_ + step_first_[s - 1] + k; }

  float* data_;
  size_t count_;
  MPI_Comm comm_;
  size_t p_, r_;
  int left_, right_;
  std::vector<Message> messages_;   // the receive order
  std::vector<size_t> step_first_;  // per step, its first message's index in the receive order
  size_t first_send_ = 0;           // step 0's segments, sent before any receive
  RingScratch& scratch_ = ring_scratch();
};

void mpi_allreduce_in_place(float* data, size_t count, MPI_Comm comm) {
  for (size_t done = 0; done < count;) {
    const size_t n = std::min<size_t>(count - done, INT_MAX);
    DLSCALE_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, data + done, static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm));
    done += n;
  }
}

}  // namespace

void allreduce_sum_in_place(float* data, size_t count, MPI_Comm comm) {
  int size = 1, rank = 0;
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &size));
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  if (size == 1) return;
  const auto p = static_cast<size_t>(size);
  if (count * sizeof(float) < kRingMinBytes || count < p) {
    mpi_allreduce_in_place(data, count, comm);
    return;
  }
  Ring(data, count, comm, rank, size).run();
}

}  // namespace dlscale
