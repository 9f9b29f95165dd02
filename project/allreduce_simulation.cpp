#include "project/allreduce_simulation.h"

#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Barrier.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Mailbox.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

#include "project/simgrid_platform.h"

namespace sg4 = simgrid::s4u;

namespace dlscale::project {
namespace {

uint64_t whole_bytes(double bytes) { return static_cast<uint64_t>(std::llround(bytes)); }

class AllreduceRun {
 public:
  AllreduceRun(const AllreduceSchedule& s, std::vector<sg4::Host*> hosts)
      : s_(s),
        hosts_(std::move(hosts)),
        buckets_(static_cast<int>(s.bucket_bytes.size())),
        done_(static_cast<size_t>(s.steps) * s.ranks, 0.0),
        gathered_(s.sharded ? done_.size() : 0, 0.0) {
    for (int r = 0; r < s_.ranks; ++r) all_ranks_.push_back(r);
    edge_latency_s_ = slowest_edge_latency(all_ranks_);
    if (s_.host_hierarchy) {
      // Each node's ranks in rank order, its first the leader; the leaders' ring in rank order,
      // as dlscale splits its communicators.
      std::vector<int> slot(*std::max_element(s_.node_of.begin(), s_.node_of.end()) + 1, -1);
      for (int r = 0; r < s_.ranks; ++r) {
        int& node = slot[s_.node_of[r]];
        if (node < 0) {
          node = static_cast<int>(node_ranks_.size());
          node_ranks_.emplace_back();
          leaders_.push_back(r);
        }
        node_ranks_[node].push_back(r);
        largest_node_ = std::max(largest_node_, static_cast<int>(node_ranks_[node].size()));
      }
      leader_latency_s_ = slowest_edge_latency(leaders_);
    }
  }

  /// The latency of the slowest edge of a ring of `ring`'s ranks, in that order: it paces every
  /// one of the ring's steps.
  double slowest_edge_latency(const std::vector<int>& ring) const {
    double slowest = 0;
    for (size_t i = 0; i < ring.size(); ++i) {
      std::vector<sg4::Link*> links;
      double latency = 0;
      hosts_[ring[i]]->route_to(hosts_[ring[(i + 1) % ring.size()]], links, &latency);
      slowest = std::max(slowest, latency);
    }
    return slowest;
  }

  int next(int r) const { return (r + 1) % s_.ranks; }
  size_t index(int step, int rank) const { return static_cast<size_t>(step) * s_.ranks + rank; }
  /// What crosses the network for bucket b: `bytes` round a ring in `steps` steps of bytes / P,
  /// or in two levels.
  struct Collective {
    double bytes;
    int steps;
    bool two_level;
  };
  /// The gradients' collective of bucket b (`parameters` false): an all-reduce, 2(P-1) steps
  /// (or in two levels); a sharded optimiser's reduce-scatter, P-1; an embedding's rows
  /// all-gathered, P-1 steps of the rows' bytes, or beyond the crossover a flat all-reduce of the
  /// block. The parameters' all-gather after a sharded update (`parameters` true): P-1 steps of
  /// the bucket's parameters.
  Collective collective(int b, bool parameters) const {
    const int half = s_.ranks - 1;
    if (parameters) return {s_.parameter_bytes[b], half, false};
    if (s_.rows[b]) {
      return s_.gathered_bytes[b] > 0 ? Collective{s_.gathered_bytes[b], half, false}
                                      : Collective{s_.bucket_bytes[b], 2 * half, false};
    }
    return {s_.bucket_bytes[b], s_.sharded ? half : 2 * half, s_.host_hierarchy};
  }
  /// Sharded: when rank r's update ends in step `step`, from the step's start (it begins once
  /// the rank's backward and its reduce-scatters have ended).
  double update_end(int step, int rank) const {
    const size_t i = index(step, rank);
    return std::max(s_.backward_end_s[i], done_[i]) + s_.update_s[i];
  }
  double ready(int step, int rank, int bucket) const {
    return s_.ready_s[(static_cast<size_t>(step) * s_.ranks + rank) * buckets_ + bucket];
  }

  /// The flow model: an actor per lane drives every rank's ring of that lane's buckets, one
  /// after another (a lane's buckets are b, b + lanes, ...). A ring cannot end before its last
  /// rank has joined (every chunk passes through every rank), so a bucket's flows start when the
  /// last rank has it and the lane's bucket before it has ended; each rank's one flow to its
  /// successor carries what the ring's steps would (2(P-1) chunks of n/P for an all-reduce, P-1
  /// for a reduce-scatter or an all-gather), sharing the links with the other lanes' flows; the
  /// ring ends with its slowest flow, plus the latencies of the steps that the single flow does
  /// not pay. (An actor per rank, with a barrier to wait for the slowest flow, took about twice
  /// as long at P = 8192.) Sharded, the lanes meet once their reduce-scatters are done, and each
  /// all-gathers its buckets from when the last rank has updated.
  void flow_lane(int lane, const sg4::BarrierPtr& barrier) {
    for (int step = 0; step < s_.steps; ++step) {
      barrier->wait();  // the step starts when every lane's rings of the step before are done
      const double t0 = sg4::Engine::get_clock();
      const double reduced = flow_rings(lane, t0, false, [&](int b) {
        double last = 0;
        for (int r = 0; r < s_.ranks; ++r) last = std::max(last, ready(step, r, b));
        return last;
      });
      for (int r = 0; r < s_.ranks; ++r) finished(step, r, reduced);
      if (!s_.sharded) continue;
      barrier->wait();  // every lane's reduce-scatters done: each rank's update can begin
      double updated = 0;
      for (int r = 0; r < s_.ranks; ++r) updated = std::max(updated, update_end(step, r));
      const double gathered = flow_rings(lane, t0, true, [updated](int) { return updated; });
      for (int r = 0; r < s_.ranks; ++r) gathered_[index(step, r)] = std::max(gathered_[index(step, r)], gathered);
    }
  }

  /// The collectives of one lane's buckets in the flow model (the gradients', or with
  /// `parameters` the parameters' all-gather), bucket b from `start(b)` seconds after t0 and not
  /// before the lane's bucket before it has ended; when the last ends, after t0.
  template <class Start>
  double flow_rings(int lane, double t0, bool parameters, const Start& start) {
    double end = 0;
    for (int b = lane; b < buckets_; b += s_.lanes) {
      sg4::this_actor::sleep_until(t0 + std::max(end, start(b)));
      const Collective c = collective(b, parameters);
      if (c.two_level) {
        two_level_flows(c.bytes);
      } else {
        ring_flows(all_ranks_, c.bytes, c.steps, edge_latency_s_);
      }
      end = sg4::Engine::get_clock() - t0;
    }
    return end;
  }

  /// One ring of `ring`'s ranks over `bytes`, `steps` steps of bytes / its ranks, in the flow
  /// model: each rank's one flow to its successor, then the latencies of the other steps.
  void ring_flows(const std::vector<int>& ring, double bytes, int steps, double edge_latency_s) {
    const auto m = static_cast<int>(ring.size());
    const uint64_t each = whole_bytes(static_cast<double>(steps) / m * bytes);
    std::vector<sg4::CommPtr> flows;
    flows.reserve(ring.size());
    for (int i = 0; i < m; ++i)
      flows.push_back(sg4::Comm::sendto_async(hosts_[ring[i]], hosts_[ring[(i + 1) % m]], each));
    sg4::Comm::wait_all(flows);
    sg4::this_actor::sleep_for((steps - 1) * edge_latency_s);
  }

  /// The two-level all-reduce of `bytes`: a binomial reduce to each node's leader (round by
  /// round, every node's messages of a round at once), the leaders' ring, and the broadcast
  /// back down the tree.
  void two_level_flows(double bytes) {
    int top = 1;  // the tree's last round sends from local index `top` on
    while (top * 2 < largest_node_) top *= 2;
    for (int half = 1; half < largest_node_; half *= 2) tree_round(bytes, half, true);
    const auto leaders = static_cast<int>(leaders_.size());
    if (leaders > 1) ring_flows(leaders_, bytes, 2 * (leaders - 1), leader_latency_s_);
    for (int half = top; half >= 1 && largest_node_ > 1; half /= 2) tree_round(bytes, half, false);
  }

  /// One round of the binomial tree in every node: local rank i with i mod 2·half = half sends
  /// the bucket to i − half (up), or receives it from there (down).
  void tree_round(double bytes, int half, bool up) {
    std::vector<sg4::CommPtr> flows;
    for (const std::vector<int>& node : node_ranks_) {
      for (size_t i = half; i < node.size(); i += 2 * static_cast<size_t>(half)) {
        sg4::Host* child = hosts_[node[i]];
        sg4::Host* parent = hosts_[node[i - half]];
        flows.push_back(up ? sg4::Comm::sendto_async(child, parent, whole_bytes(bytes))
                           : sg4::Comm::sendto_async(parent, child, whole_bytes(bytes)));
      }
    }
    sg4::Comm::wait_all(flows);
  }

  /// The message model: rank r's actor for a lane runs the ring of that lane's buckets as an
  /// MPI or NCCL ring does, each step sending n/P bytes to rank r+1 and receiving n/P from rank
  /// r-1, a step starting when the one before it has arrived; the lane's buckets one after
  /// another, each once it is ready there. Sharded, the rank's lanes meet once its
  /// reduce-scatters are done, and each all-gathers its buckets from when the rank has updated.
  void message_rank(int rank, int lane, const sg4::BarrierPtr& barrier, const sg4::BarrierPtr& rank_lanes) {
    const std::string suffix = "/" + std::to_string(lane);
    sg4::Mailbox* in = sg4::Mailbox::by_name("rank-" + std::to_string(rank) + suffix);
    sg4::Mailbox* out = sg4::Mailbox::by_name("rank-" + std::to_string(next(rank)) + suffix);
    for (int step = 0; step < s_.steps; ++step) {
      barrier->wait();  // the step starts when every rank's rings of the step before are done
      const double t0 = sg4::Engine::get_clock();
      finished(step, rank, message_rings(lane, t0, in, out, false, [&](int b) { return ready(step, rank, b); }));
      if (!s_.sharded) continue;
      rank_lanes->wait();  // every lane of this rank reduce-scattered: its update can begin
      const double updated = update_end(step, rank);
      const double gathered = message_rings(lane, t0, in, out, true, [updated](int) { return updated; });
      gathered_[index(step, rank)] = std::max(gathered_[index(step, rank)], gathered);
    }
  }

  /// One rank's rings of one lane's buckets in the message model (the gradients', or with
  /// `parameters` the parameters' all-gather), bucket b from `start(b)`
  /// seconds after t0 and not before the lane's bucket before it has ended; when the last ends.
  template <class Start>
  double message_rings(int lane, double t0, sg4::Mailbox* in, sg4::Mailbox* out, bool parameters, const Start& start) {
    static int token = 0;  // the messages carry no data: only their simulated size matters
    double end = 0;
    for (int b = lane; b < buckets_; b += s_.lanes) {
      sg4::this_actor::sleep_until(t0 + std::max(end, start(b)));
      const Collective c = collective(b, parameters);
      const uint64_t chunk = whole_bytes(c.bytes / s_.ranks);
      for (int i = 0; i < c.steps; ++i) {
        sg4::CommPtr send = out->put_async(&token, chunk);
        int* received = nullptr;
        sg4::CommPtr receive = in->get_async(&received);
        send->wait();
        receive->wait();
      }
      end = sg4::Engine::get_clock() - t0;
    }
    return end;
  }

  /// Open MPI libnbc's binomial all-reduce of every bucket as rank `rank` runs it (its schedule
  /// in nbc_iallreduce.c, root 0), each bucket from when it is ready here, all of them at once
  /// (libnbc progresses every outstanding request together, so buckets in flight share the
  /// links):
  ///
  /// - reduce, rounds r = 1, 2, ...: a rank that is a multiple of 2^r receives the bucket from
  ///   rank + 2^(r-1) (when there is one) and waits for it before the next round; any other
  ///   sends its partial sum to rank - 2^(r-1) and leaves the reduction;
  /// - broadcast, once its send up has ended (rank 0: once it has reduced the bucket): every
  ///   rank but 0 receives the bucket from its parent (itself less its highest bit), then sends
  ///   it to all its children (itself plus each power of two above its highest bit) at once.
  ///
  /// One actor per rank drives its buckets' schedules as a libnbc progress loop does: an actor
  /// per rank and bucket would pass Linux's 65536 memory mappings per process at P = 8192 with
  /// four buckets (SimGrid gives each actor's stack a guard page).
  void binomial_rank(int rank, const sg4::BarrierPtr& barrier) {
    enum class Wait { child, parent_send, parent, child_send };
    struct Pending {
      int bucket;
      Wait wait;
    };
    int highest = 1;  // the rank's highest bit: its parent is rank - highest
    while (highest * 2 <= rank) highest *= 2;
    const int first_child = rank == 0 ? 1 : highest * 2;
    for (int step = 0; step < s_.steps; ++step) {
      barrier->wait();  // the step starts when every rank's buckets of the step before are done
      const double t0 = sg4::Engine::get_clock();
      std::vector<sg4::CommPtr> comms;
      std::vector<Pending> pending;  // what each of comms is
      std::vector<int> half(buckets_, 1), sends_left(buckets_, 0);
      int started = 0, finished = 0;
      const auto post = [&](sg4::CommPtr comm, int b, Wait wait) {
        comms.push_back(std::move(comm));
        pending.push_back({b, wait});
      };
      const auto send_down = [&](int b) {
        for (int c = first_child; rank + c < s_.ranks; c *= 2) {
          post(send(b, rank, rank + c), b, Wait::child_send);
          ++sends_left[b];
        }
        if (sends_left[b] == 0) ++finished;
      };
      const auto broadcast = [&](int b) {
        if (rank == 0) {
          send_down(b);
        } else {
          post(receive_async(b, rank - highest, rank), b, Wait::parent);
        }
      };
      const auto reduce = [&](int b) {  // from round half[b] = 2^(r-1) on
        for (; half[b] < s_.ranks; half[b] *= 2) {
          if (rank % (2 * half[b]) != 0) return post(send(b, rank, rank - half[b]), b, Wait::parent_send);
          if (rank + half[b] < s_.ranks) return post(receive_async(b, rank + half[b], rank), b, Wait::child);
        }
        broadcast(b);  // rank 0 has the whole sum
      };
      while (finished < buckets_) {
        const double now = sg4::Engine::get_clock();
        // Buckets start in readiness order; a hair of slack for the clock's rounding.
        while (started < buckets_ && t0 + ready(step, rank, started) <= now + 1e-12) reduce(started++);
        if (finished == buckets_) break;
        const double next_ready = started < buckets_ ? t0 + ready(step, rank, started) : -1;
        if (comms.empty()) {
          sg4::this_actor::sleep_until(next_ready);
          continue;
        }
        const ssize_t i = sg4::Comm::wait_any_for(comms, next_ready < 0 ? -1.0 : next_ready - now);
        if (i < 0) continue;  // the next bucket is ready
        const Pending done = pending[static_cast<size_t>(i)];
        comms.erase(comms.begin() + i);
        pending.erase(pending.begin() + i);
        switch (done.wait) {
          case Wait::child:
            half[done.bucket] *= 2;
            reduce(done.bucket);
            break;
          case Wait::parent_send:
            broadcast(done.bucket);
            break;
          case Wait::parent:
            send_down(done.bucket);
            break;
          case Wait::child_send:
            if (--sends_left[done.bucket] == 0) ++finished;
            break;
        }
      }
      done_[static_cast<size_t>(step) * s_.ranks + rank] = sg4::Engine::get_clock() - t0;
    }
  }

  AllreduceTimes times() const { return {done_, gathered_}; }
  /// Rank `rank` has its buckets of one lane reduced `end` seconds into step `step`: its step's
  /// all-reduce ends with its last lane.
  void finished(int step, int rank, double end) {
    double& done = done_[static_cast<size_t>(step) * s_.ranks + rank];
    done = std::max(done, end);
  }
  sg4::Host* host(int rank) const { return hosts_[rank]; }

 private:
  /// The mailbox of the messages of `bucket` from rank `from` to rank `to`: a receive matches
  /// only its own sender, as an MPI receive from a named source does.
  static sg4::Mailbox* edge(int bucket, int from, int to) {
    return sg4::Mailbox::by_name(std::to_string(bucket) + ":" + std::to_string(from) + ">" + std::to_string(to));
  }
  sg4::CommPtr send(int bucket, int from, int to) const {
    static int token = 0;  // the messages carry no data: only their simulated size matters
    return edge(bucket, from, to)->put_async(&token, whole_bytes(s_.bucket_bytes[bucket]));
  }
  sg4::CommPtr receive_async(int bucket, int from, int to) { return edge(bucket, from, to)->get_async<int>(&sink_); }

  const AllreduceSchedule& s_;
  std::vector<sg4::Host*> hosts_;
  int buckets_;
  std::vector<int> all_ranks_;                ///< 0 .. P-1: the flat ring
  double edge_latency_s_ = 0;                 ///< its slowest edge's
  std::vector<std::vector<int>> node_ranks_;  ///< host hierarchy: each node's ranks, its leader first
  std::vector<int> leaders_;                  ///< and the leaders' ring
  double leader_latency_s_ = 0;
  int largest_node_ = 1;
  std::vector<double> done_, gathered_;
  int* sink_ = nullptr;  ///< where every received message's (empty) payload goes
};

}  // namespace

AllreduceTimes simulate_allreduces(const ClusterDescription& cluster, const AllreduceSchedule& schedule) {
  const size_t buckets = schedule.bucket_bytes.size(),
               rank_steps = static_cast<size_t>(schedule.ranks) * schedule.steps;
  if (schedule.rows.size() != buckets || schedule.gathered_bytes.size() != buckets ||
      schedule.parameter_bytes.size() != buckets || schedule.ready_s.size() != rank_steps * buckets ||
      (schedule.sharded && (schedule.backward_end_s.size() != rank_steps || schedule.update_s.size() != rank_steps)) ||
      (schedule.host_hierarchy && schedule.node_of.size() != static_cast<size_t>(schedule.ranks))) {
    throw std::invalid_argument(
        "simulate_allreduces: a schedule whose lists do not match its buckets, ranks and steps");
  }
  const std::unique_ptr<sg4::Engine> engine = make_engine();

  AllreduceRun run(schedule, build_cluster(cluster, schedule.ranks));
  if (schedule.algorithm == AllreduceAlgorithm::binomial) {
    sg4::BarrierPtr barrier = sg4::Barrier::create(static_cast<unsigned>(schedule.ranks));
    for (int r = 0; r < schedule.ranks; ++r) {
      sg4::Actor::create("rank-" + std::to_string(r), run.host(r),
                         [&run, r, barrier] { run.binomial_rank(r, barrier); });
    }
  } else if (schedule.model == AllreduceModel::flow) {
    sg4::BarrierPtr barrier = sg4::Barrier::create(static_cast<unsigned>(schedule.lanes));
    for (int lane = 0; lane < schedule.lanes; ++lane) {
      sg4::Actor::create("ring-" + std::to_string(lane), run.host(0),
                         [&run, lane, barrier] { run.flow_lane(lane, barrier); });
    }
  } else {
    sg4::BarrierPtr barrier = sg4::Barrier::create(static_cast<unsigned>(schedule.ranks * schedule.lanes));
    for (int r = 0; r < schedule.ranks; ++r) {
      sg4::BarrierPtr rank_lanes = sg4::Barrier::create(static_cast<unsigned>(schedule.lanes));
      for (int lane = 0; lane < schedule.lanes; ++lane) {
        sg4::Actor::create("rank-" + std::to_string(r) + "/" + std::to_string(lane), run.host(r),
                           [&run, r, lane, barrier, rank_lanes] { run.message_rank(r, lane, barrier, rank_lanes); });
      }
    }
  }
  engine->run();
  return run.times();
}

}  // namespace dlscale::project
