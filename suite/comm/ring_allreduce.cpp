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

/// What a ring step receives into, kept per thread from one all-reduce to the next: a fresh
/// buffer per bucket would cost an allocation and its page faults (megabytes) every step.
struct RingScratch {
  std::vector<float> incoming;                      // the left neighbour's chunk, during a reduce-scatter step
  std::vector<MPI_Request> requests;                // this step's receives, then its sends
  std::chrono::steady_clock::duration last_wait{};  // how long the previous wait took (wait_all)
};

RingScratch& ring_scratch() {
  thread_local RingScratch scratch;
  return scratch;
}

/// One step of the ring: `send` (ns floats) to the right neighbour while `target` (nr floats)
/// receives the left one's. Every segment of both is posted at once, so that the link always has
/// data in flight; received segments are used in order as they arrive. reduce: they are added into
/// target (reduce-scatter); otherwise written there (all-gather).
class RingStep {
 public:
  RingStep(MPI_Comm comm, int left, int right) : comm_(comm), left_(left), right_(right) {}

  void run(const float* send, size_t ns, float* target, size_t nr, bool reduce) {
    const size_t receives = (nr + kSegment - 1) / kSegment, sends = (ns + kSegment - 1) / kSegment;
    std::vector<float>& incoming = scratch_.incoming;
    std::vector<MPI_Request>& requests = scratch_.requests;
    if (reduce && incoming.size() < nr) incoming.resize(nr);
    float* into = reduce ? incoming.data() : target;
    requests.assign(receives + sends, MPI_REQUEST_NULL);
    for (size_t k = 0; k < receives; ++k) {
      const int n = static_cast<int>(std::min(kSegment, nr - k * kSegment));
      DLSCALE_CHECK_MPI(MPI_Irecv(into + k * kSegment, n, MPI_FLOAT, left_, kTag, comm_, &requests[k]));
    }
    for (size_t k = 0; k < sends; ++k) {
      const int n = static_cast<int>(std::min(kSegment, ns - k * kSegment));
      DLSCALE_CHECK_MPI(MPI_Isend(send + k * kSegment, n, MPI_FLOAT, right_, kTag, comm_, &requests[receives + k]));
    }
    for (size_t k = 0; k < receives; ++k) {
      wait_all(1, &requests[k], scratch_.last_wait);
      if (!reduce) continue;
      const size_t at = k * kSegment, n = std::min(kSegment, nr - at);
      for (size_t i = 0; i < n; ++i) target[at + i] += into[at + i];
    }
    wait_all(static_cast<int>(sends), requests.data() + receives, scratch_.last_wait);
  }

 private:
  MPI_Comm comm_;
  int left_, right_;
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
  // Chunk c is [first(c), first(c + 1)): P nearly equal parts.
  const auto first = [&](size_t c) { return count / p * c + std::min(c, count % p); };
  const auto chunk = [&](size_t c) { return std::pair<float*, size_t>{data + first(c), first(c + 1) - first(c)}; };
  const size_t r = static_cast<size_t>(rank);
  RingStep step(comm, (rank + size - 1) % size, (rank + 1) % size);
  // Reduce-scatter: after P - 1 steps this rank holds the full sum of chunk r + 1.
  for (size_t s = 0; s + 1 < p; ++s) {
    const auto [send, ns] = chunk((r + p - s) % p);
    const auto [recv, nr] = chunk((r + p - s - 1) % p);
    step.run(send, ns, recv, nr, true);
  }
  // All-gather: each summed chunk travels once round the ring.
  for (size_t s = 0; s + 1 < p; ++s) {
    const auto [send, ns] = chunk((r + 1 + p - s) % p);
    const auto [recv, nr] = chunk((r + p - s) % p);
    step.run(send, ns, recv, nr, false);
  }
}

}  // namespace dlscale
