// The built-in suites. Each reproduces one seed paper's experiment as far as a timing run can
// (docs/workloads.md says where dlscale had to choose because the paper is silent). Cases on a
// device or driver this build or machine lacks are recorded as unsupported and the sweep goes on.
#include "suite/builtin_suites.h"

#include "suite/errors.h"

namespace dlscale {

const std::vector<BuiltinSuite>& builtin_suites() {
  static const std::vector<BuiltinSuite> kSuites = {
      {"study",
       "the default: strong and weak scaling over 1 and 2 ranks with phases, every CPU driver, a thread sweep; about 3 "
       "minutes on 2 cores",
       R"(# What a first run should show: how three contrasting networks scale from 1 to 2 ranks and why
# (--phases: the diagnosis, and the all-reduce microbenchmark of every 2-rank case), on every CPU
# driver. A compute-bound CNN, a communication-heavy FCN (4.2 M parameters, 17 MB of gradients
# for little compute) and an LSTM, at sizes that finish in minutes on 2 cores. One thread per rank
# so that P ranks use P cores; the thread sweep runs on one rank (it needs a CPU set of two cores:
# `mpirun --bind-to none`, as scripts/quickstart.sh launches it).
device = "cpu"
ranks = [1, 2]
threads = 1
phases = true
warmup = 2
iterations = 20

[[matrix]]
driver = "libtorch"
scaling = ["strong", "weak"]
workload = ["cifar10_cnn", "fcn5:features=1024,width=1024", "lstm32:vocab=2000,seq=16"]
batch = 32

[[matrix]]
driver = ["onednn", "kokkos"]
scaling = "strong"
workload = ["cifar10_cnn", "fcn5:features=1024,width=1024", "lstm32:vocab=2000,seq=16"]
batch = 32

# The float64 oracle is many times slower: fewer iterations.
[[matrix]]
driver = "reference"
scaling = "strong"
workload = ["cifar10_cnn", "fcn5:features=1024,width=1024", "lstm32:vocab=2000,seq=16"]
batch = 32
warmup = 1
iterations = 4

# Batch 64: not the scaling cases' one-thread case again.
[[matrix]]
driver = "libtorch"
workload = "cifar10_cnn"
batch = 64
ranks = 1
threads = [1, 2]
phases = false
)"},
      {"smoke", "every seed network once at a small batch, about two minutes on 2 cores (a smoke run)",
       R"(# Small batches and few iterations: a check that everything runs, not a measurement to quote.
driver = "libtorch"
device = "cpu"
warmup = 1
iterations = 5

[[matrix]]
workload = ["fcn5", "fcn8", "lstm32", "lstm64", "vgg16_cifar", "imdb_lstm"]
batch = 16

[[matrix]]
workload = ["alexnet"]
batch = 4

[[matrix]]
workload = ["resnet50"]
batch = 2

[[matrix]]
workload = ["mnist_cnn", "cifar10_cnn", "mnist_cnn_nayak", "mnist_fnn"]
batch = 64
)"},
      {"shi2016-cpu", "Shi et al. 2016, CPU: FCN/CNN/RNN at their CPU batch sizes, threads 1-32",
       R"(# Seconds per mini-batch on synthetic data, plain SGD; thread sweep as in their Table 4/Fig. 1.
driver = "libtorch"
device = "cpu"
threads = [1, 2, 4, 8, 16, 32]
warmup = 2
iterations = 10

[[matrix]]
workload = ["fcn5", "fcn8"]
batch = 64

[[matrix]]
workload = ["alexnet", "resnet50"]
batch = 16

[[matrix]]
workload = ["lstm32", "lstm64"]
batch = 128
)"},
      {"shi2016-gpu", "Shi et al. 2016, GPU: batch-size sweeps of FCN-5/8, AlexNet, ResNet-50, LSTM-32/64",
       R"(# One GPU per rank; the batch sweeps of their Fig. 2.
driver = "libtorch"
device = "cuda"
warmup = 5
iterations = 20

[[matrix]]
workload = ["fcn5", "fcn8"]
batch = [32, 64, 128, 256, 512]

[[matrix]]
workload = "alexnet"
batch = [16, 32, 64, 128]

[[matrix]]
workload = "resnet50"
batch = [16, 32, 64]

[[matrix]]
workload = ["lstm32", "lstm64"]
batch = [64, 128, 256]
)"},
      {"shatnawi2018", "Shatnawi et al. 2018: MNIST and CIFAR-10 CNNs, CPU threads 1-32 and GPU",
       R"(# Their Table III: a CPU thread sweep and one GPU. The paper gives no batch size: 128 is dlscale's
# choice (the Keras example their networks follow).
driver = "libtorch"
workload = ["mnist_cnn", "cifar10_cnn"]
batch = 128
warmup = 2
iterations = 20

[[matrix]]
device = "cpu"
threads = [1, 2, 4, 8, 16, 32]

[[matrix]]
device = "cuda"
)"},
      {"kabakus2020", "Kabakus 2020: FNN, VGG16 and LSTM at the paper's batch sizes, on GPU and CPU",
       R"(# The paper trains on a GPU (Colab K80) and names CPU runs as future work; dlscale times both.
driver = "libtorch"
device = ["cuda", "cpu"]
warmup = 2
iterations = 10

[[matrix]]
workload = ["mnist_fnn", "vgg16_cifar"]
batch = 80

[[matrix]]
workload = "imdb_lstm"
batch = 500
)"},
      {"nayak2019", "Nayak: the MNIST CNN at batch 128 on CPU and GPU",
       R"(driver = "libtorch"
workload = "mnist_cnn_nayak"
device = ["cpu", "cuda"]
batch = 128
warmup = 2
iterations = 20
)"},
  };
  return kSuites;
}

const BuiltinSuite& find_suite(const std::string& name) {
  std::string known;
  for (const BuiltinSuite& s : builtin_suites()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  throw UsageError("unknown suite '" + name + "' (known: " + known + ")");
}

}  // namespace dlscale
