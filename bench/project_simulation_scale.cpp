// How long the SimGrid projection takes, and how much memory, at the rank counts it is for:
// a resnet50-sized step (25,557,032 float32 gradients, 102.2 MB, in four equal buckets ready
// after each quarter of backward, overlapped) with the flow model on a platform preset
// (default: 8 GPUs per node, one 25 GB/s NIC). Each simulation runs in its own process
// (project/isolated_run.h); the table gives its wall time and that process's peak resident
// memory, and the simulated step with its diagnosis parts.
//
//   build/<preset>/bench/bench_project_simulation_scale [--platform project/platforms/X.toml]
//       [--ranks 1024,4096,8192] [--steps 3] [--allreduce ring|binomial] [--model flow|message]
//
// The per-rank compute samples are made up (forward 30 ms, backward 60-68 ms, update 3 ms):
// they set the step, not the cost of simulating it, which grows with P and the buckets.
// Figures measured are in docs/projection.md.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "project/platform.h"
#include "project/training_simulation.h"

int main(int argc, char** argv) {
  using namespace dlscale::project;
  CLI::App app{"Wall time and peak memory of the SimGrid step simulation at large P"};
  std::string platform = std::string(DLSCALE_SOURCE_DIR) + "/project/platforms/gpu-8x-nvlink-25GBps-nic.toml";
  std::vector<int> ranks = {1024, 4096, 8192};
  int steps = 3;
  std::string model = "flow", allreduce = "ring";
  app.add_option("--platform", platform, "platform TOML")->check(CLI::ExistingFile);
  app.add_option("--ranks", ranks, "rank counts")->delimiter(',');
  app.add_option("--steps", steps, "simulated steps per rank count")->check(CLI::PositiveNumber);
  app.add_option("--allreduce", allreduce, "all-reduce algorithm")->check(CLI::IsMember({"ring", "binomial"}));
  app.add_option("--model", model, "ring model")->check(CLI::IsMember({"flow", "message"}));
  CLI11_PARSE(app, argc, argv);

  try {
    const ClusterDescription cluster = load_platform_file(platform);
    TrainingInputs in;
    in.steps = steps;
    in.algorithm = allreduce == "ring" ? AllreduceAlgorithm::ring : AllreduceAlgorithm::binomial;
    in.model = model == "flow" ? AllreduceModel::flow : AllreduceModel::message;
    const double gradient_bytes = 25557032.0 * 4;
    for (int b = 1; b <= 4; ++b) in.buckets.push_back({gradient_bytes / 4, b / 4.0});
    for (int i = 0; i < 32; ++i) in.samples.push_back({0.030, 0.060 + 0.00025 * i, 0.003});

    fmt::print(
        "platform {} ({}, {} placement), {} all-reduce, {} model, {} steps, {:.1f} MB of gradients in {} buckets\n",
        cluster.name, fabric_name(cluster.fabric), placement_name(cluster.placement), allreduce, model, steps,
        gradient_bytes / 1e6, in.buckets.size());
    fmt::print("{:>6} {:>6} {:>8} {:>9} | {:>8} {:>8} {:>9} {:>9} {:>8}\n", "P", "nodes", "wall_s", "peak_MiB",
               "step_ms", "compute", "straggler", "exposed_ar", "update");
    for (int p : ranks) {
      in.ranks = p;
      const TrainingSimulation sim = simulate_training(cluster, in);
      const StepBreakdown& s = sim.mean;
      fmt::print("{:>6} {:>6} {:>8.2f} {:>9.1f} | {:>8.3f} {:>8.3f} {:>9.3f} {:>9.3f} {:>8.3f}\n", p,
                 nodes_for_ranks(cluster, p), sim.wall_s, static_cast<double>(sim.peak_rss_bytes) / (1 << 20),
                 s.step_s * 1e3, s.compute_s * 1e3, s.straggler_wait_s * 1e3, s.exposed_allreduce_s * 1e3,
                 s.update_and_other_s * 1e3);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_project_simulation_scale: {}\n", e.what());
    return 1;
  }
  return 0;
}
