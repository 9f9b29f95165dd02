// The named networks of docs/workloads.md. Each builder takes its size overrides from a key/value
// map so that tests can run small variants with the same structure; defaults are the papers'.
#include "workloads/catalog.h"

#include <functional>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

namespace dlscale {

namespace {

using Overrides = std::map<std::string, int64_t>;

/// Reads an override with a default, erasing it so that leftovers can be reported as unknown.
int64_t take(Overrides& o, const std::string& key, int64_t fallback) {
  auto it = o.find(key);
  if (it == o.end()) return fallback;
  const int64_t v = it->second;
  o.erase(it);
  return v;
}

Layer linear(int64_t in, int64_t out) { return {LayerKind::kLinear, in, out}; }
Layer conv(int64_t in, int64_t out, int64_t k, int64_t stride = 1, int64_t pad = 0) {
  Layer l{LayerKind::kConv2d, in, out};
  l.kernel = k;
  l.stride = stride;
  l.padding = pad;
  return l;
}
Layer maxpool(int64_t k, int64_t stride, int64_t pad = 0) {
  Layer l{LayerKind::kMaxPool2d};
  l.kernel = k;
  l.stride = stride;
  l.padding = pad;
  return l;
}
Layer dropout(double p) {
  Layer l{LayerKind::kDropout};
  l.p = p;
  return l;
}
Layer act(LayerKind kind) { return {kind}; }

int64_t out_size(int64_t size, int64_t k, int64_t stride, int64_t pad) { return (size + 2 * pad - k) / stride + 1; }

/// A fully connected stack: input -> hidden widths (with `activation` after each) -> classes.
Workload fcn(int64_t input, const std::vector<int64_t>& hidden, int64_t classes, LayerKind activation) {
  Workload w;
  w.input_shape = {input};
  w.num_classes = classes;
  int64_t in = input;
  for (int64_t h : hidden) {
    w.layers.push_back(linear(in, h));
    w.layers.push_back(act(activation));
    in = h;
  }
  w.layers.push_back(linear(in, classes));
  return w;
}

Workload alexnet(Overrides& o) {
  const int64_t image = take(o, "image", 224), width = take(o, "width", 64), fc = take(o, "fc", 4096),
                classes = take(o, "classes", 1000);
  // Channel plan 64-192-384-256-256, scaled by width/64.
  const int64_t c1 = width, c2 = width * 3, c3 = width * 6, c4 = width * 4, c5 = width * 4;
  Workload w;
  w.input_shape = {3, image, image};
  w.num_classes = classes;
  int64_t s = out_size(image, 11, 4, 2);
  s = out_size(s, 3, 2, 0);
  s = out_size(s, 5, 1, 2);
  s = out_size(s, 3, 2, 0);
  s = out_size(s, 3, 2, 0);  // the three 3x3 convolutions keep the size
  w.layers = {conv(3, c1, 11, 4, 2), act(LayerKind::kReLU), maxpool(3, 2),         conv(c1, c2, 5, 1, 2),
              act(LayerKind::kReLU), maxpool(3, 2),         conv(c2, c3, 3, 1, 1), act(LayerKind::kReLU),
              conv(c3, c4, 3, 1, 1), act(LayerKind::kReLU), conv(c4, c5, 3, 1, 1), act(LayerKind::kReLU),
              maxpool(3, 2),         {LayerKind::kFlatten}, dropout(0.5),          linear(c5 * s * s, fc),
              act(LayerKind::kReLU), dropout(0.5),          linear(fc, fc),        act(LayerKind::kReLU),
              linear(fc, classes)};
  return w;
}

Workload resnet50(Overrides& o) {
  const int64_t image = take(o, "image", 224), width = take(o, "width", 64), classes = take(o, "classes", 1000);
  Workload w;
  w.input_shape = {3, image, image};
  w.num_classes = classes;
  Layer stem = conv(3, width, 7, 2, 3);
  stem.bias = false;
  Layer bn{LayerKind::kBatchNorm2d, width};
  w.layers = {stem, bn, act(LayerKind::kReLU), maxpool(3, 2, 1)};
  int64_t in = width;
  const int64_t blocks[4] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t mid = width << stage, out = mid * 4;
    for (int64_t b = 0; b < blocks[stage]; ++b) {
      Layer l{LayerKind::kBottleneck, in, out, mid};
      l.stride = (stage > 0 && b == 0) ? 2 : 1;
      w.layers.push_back(l);
      in = out;
    }
  }
  w.layers.push_back({LayerKind::kGlobalAvgPool});
  w.layers.push_back(linear(in, classes));
  return w;
}

/// PTB language model (Shi et al.): embedding, two LSTM layers, per-step Linear to the vocabulary.
Workload ptb_lstm(Overrides& o, int64_t default_seq) {
  const int64_t vocab = take(o, "vocab", 10000), embed = take(o, "embed", 256), hidden = take(o, "hidden", 256),
                seq = take(o, "seq", default_seq);
  Workload w;
  w.input_kind = InputKind::kTokens;
  w.input_shape = {seq};
  w.vocab = vocab;
  w.num_classes = vocab;
  w.label_per_step = true;
  Layer lstm{LayerKind::kLstm, embed, hidden};
  lstm.num_layers = 2;
  w.layers = {{LayerKind::kEmbedding, vocab, embed}, lstm, linear(hidden, vocab)};
  return w;
}

/// Shatnawi et al.'s two-convolution CNN for MNIST (1x28x28) or CIFAR-10 (3x32x32).
Workload shatnawi_cnn(Overrides& o, int64_t channels, int64_t image) {
  const int64_t width = take(o, "width", 32), fc = take(o, "fc", 128);
  Workload w;
  w.input_shape = {channels, image, image};
  w.num_classes = 10;
  const int64_t s = ((image - 2) / 2 - 2) / 2;
  w.layers = {conv(channels, width, 3),
              act(LayerKind::kReLU),
              maxpool(2, 2),
              dropout(0.25),
              conv(width, 2 * width, 3),
              act(LayerKind::kReLU),
              maxpool(2, 2),
              dropout(0.25),
              {LayerKind::kFlatten},
              linear(2 * width * s * s, fc),
              act(LayerKind::kReLU),
              dropout(0.5),
              linear(fc, 10)};
  return w;
}

Workload vgg16_cifar(Overrides& o) {
  const int64_t width = take(o, "width", 64), fc = take(o, "fc", 4096);
  Workload w;
  w.input_shape = {3, 32, 32};
  w.num_classes = 10;
  const int64_t plan[5][3] = {{1, 1, 0}, {2, 2, 0}, {4, 4, 4}, {8, 8, 8}, {8, 8, 8}};  // x width; 0 = none
  int64_t in = 3;
  for (const auto& stage : plan) {
    for (int64_t mult : stage) {
      if (mult == 0) continue;
      w.layers.push_back(conv(in, mult * width, 3, 1, 1));
      w.layers.push_back(act(LayerKind::kReLU));
      in = mult * width;
    }
    w.layers.push_back(maxpool(2, 2));
  }
  w.layers.push_back({LayerKind::kFlatten});
  for (const Layer& l : {linear(in, fc), act(LayerKind::kReLU), dropout(0.5), linear(fc, fc), act(LayerKind::kReLU),
                         dropout(0.5), linear(fc, 10)}) {
    w.layers.push_back(l);
  }
  return w;
}

Workload imdb_lstm(Overrides& o) {
  const int64_t vocab = take(o, "vocab", 5000), embed = take(o, "embed", 32), hidden = take(o, "hidden", 100),
                seq = take(o, "seq", 500);
  Workload w;
  w.input_kind = InputKind::kTokens;
  w.input_shape = {seq};
  w.vocab = vocab;
  w.num_classes = 1;
  w.loss = LossKind::kSigmoidBinaryCrossEntropy;
  Layer lstm{LayerKind::kLstm, embed, hidden};
  lstm.all_steps = false;
  w.layers = {{LayerKind::kEmbedding, vocab, embed}, lstm, linear(hidden, 1)};
  return w;
}

Workload nayak_cnn(Overrides& o) {
  const int64_t width = take(o, "width", 32), fc = take(o, "fc", 1024);
  Workload w;
  w.input_shape = {1, 28, 28};
  w.num_classes = 10;
  w.layers = {conv(1, width, 5),     act(LayerKind::kReLU), maxpool(2, 2),         conv(width, 2 * width, 3),
              act(LayerKind::kReLU), maxpool(2, 2),         {LayerKind::kFlatten}, linear(2 * width * 25, fc),
              act(LayerKind::kReLU), dropout(0.25),         linear(fc, 10)};
  return w;
}

struct Builder {
  CatalogEntry entry;
  std::function<Workload(Overrides&)> build;
};

const char* const kShi = "Shi et al. 2016";
const char* const kShatnawi = "Shatnawi et al. 2018";
const char* const kKabakus = "Kabakus 2020";
const char* const kNayak = "Nayak";

const std::vector<Builder>& builders() {
  static const std::vector<Builder> kBuilders = {
      {{"fcn5", kShi, "26752-2048x3-26752 sigmoid MLP", "features=26752,width=2048"},
       [](Overrides& o) {
         const int64_t features = take(o, "features", 26752), width = take(o, "width", 2048);
         Workload w = fcn(features, {width, width, width}, features, LayerKind::kSigmoid);
         w.init = InitRule::kUniformHalf;
         return w;
       }},
      {{"fcn8", kShi, "26752-2048x6-26752 sigmoid MLP", "features=26752,width=2048"},
       [](Overrides& o) {
         const int64_t features = take(o, "features", 26752), width = take(o, "width", 2048);
         Workload w = fcn(features, std::vector<int64_t>(6, width), features, LayerKind::kSigmoid);
         w.init = InitRule::kUniformHalf;
         return w;
       }},
      {{"alexnet", kShi, "AlexNet, 3x224x224, 1000 classes", "image=224,width=64,fc=4096,classes=1000"}, alexnet},
      {{"resnet50", kShi, "ResNet-50 v1.5, 3x224x224, 1000 classes", "image=224,width=64,classes=1000"}, resnet50},
      {{"lstm32", kShi, "PTB LM: embed 256, 2x LSTM 256, 32 steps", "vocab=10000,embed=256,hidden=256,seq=32"},
       [](Overrides& o) { return ptb_lstm(o, 32); }},
      {{"lstm64", kShi, "PTB LM: embed 256, 2x LSTM 256, 64 steps", "vocab=10000,embed=256,hidden=256,seq=64"},
       [](Overrides& o) { return ptb_lstm(o, 64); }},
      {{"mnist_cnn", kShatnawi, "2-conv CNN on 1x28x28", "width=32,fc=128"},
       [](Overrides& o) { return shatnawi_cnn(o, 1, 28); }},
      {{"cifar10_cnn", kShatnawi, "2-conv CNN on 3x32x32", "width=32,fc=128"},
       [](Overrides& o) { return shatnawi_cnn(o, 3, 32); }},
      {{"mnist_fnn", kKabakus, "784-512-512-10 ReLU MLP", "width=512"},
       [](Overrides& o) {
         const int64_t width = take(o, "width", 512);
         Workload w = fcn(784, {width, width}, 10, LayerKind::kReLU);
         w.input_shape = {1, 28, 28};
         w.layers.insert(w.layers.begin(), Layer{LayerKind::kFlatten});
         return w;
       }},
      {{"vgg16_cifar", kKabakus, "VGG16 on 3x32x32, 10 classes", "width=64,fc=4096"}, vgg16_cifar},
      {{"imdb_lstm", kKabakus, "embed 5000x32, LSTM 100 over 500 tokens, binary",
        "vocab=5000,embed=32,hidden=100,seq=500"},
       imdb_lstm},
      {{"mnist_cnn_nayak", kNayak, "conv5-conv3 CNN on 1x28x28, FC 1024", "width=32,fc=1024"}, nayak_cnn},
  };
  return kBuilders;
}

Overrides parse_overrides(const std::string& name, const std::string& text) {
  Overrides o;
  // A colon promises overrides: "mnist_fnn:" or "mnist_fnn:width=16," is a slip, not a request
  // for the defaults.
  if (text.empty()) {
    throw std::invalid_argument(fmt::format("workload '{}:': an empty list of overrides after the colon", name));
  }
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    if (item.empty()) {
      throw std::invalid_argument(fmt::format("workload '{}:{}': an empty override", name, text));
    }
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw std::invalid_argument(fmt::format("workload '{}': override '{}' is not key=value", name, item));
    }
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != value.size() || value.empty() || v <= 0) {
      throw std::invalid_argument(
          fmt::format("workload '{}': override {} needs a positive integer, got '{}'", name, key, value));
    }
    if (!o.emplace(key, v).second) {
      throw std::invalid_argument(fmt::format("workload '{}': override {} is given twice", name, key));
    }
    pos = end + 1;
  }
  return o;
}

}  // namespace

const std::vector<CatalogEntry>& catalog() {
  static const std::vector<CatalogEntry> kEntries = [] {
    std::vector<CatalogEntry> e;
    for (const Builder& b : builders()) e.push_back(b.entry);
    return e;
  }();
  return kEntries;
}

Workload make_workload(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  for (const Builder& b : builders()) {
    if (b.entry.name != name) continue;
    Overrides o = colon == std::string::npos ? Overrides{} : parse_overrides(name, spec.substr(colon + 1));
    Workload w = b.build(o);
    if (!o.empty()) {
      throw std::invalid_argument(
          fmt::format("workload '{}' has no override '{}' (accepted: {})", name, o.begin()->first, b.entry.overrides));
    }
    w.name = spec;
    w.source = b.entry.source;
    activation_shapes(w);  // a size override that makes a layer not fit is an error here
    // Counts every later product builds on, checked once for overflow and for sizes no machine
    // holds, so that a huge override is one clear error instead of a wrapped count.
    int64_t params = 0, values = 0;
    try {
      params = parameter_count(w);
      values = activation_elements_per_sample(w);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("workload '{}': {}", spec, e.what()));
    }
    if (params > kMaxWorkloadCount || values > kMaxWorkloadCount) {
      throw std::invalid_argument(fmt::format(
          "workload '{}' has {} parameters and {} activation values per sample; at most {} of each are accepted", spec,
          params, values, kMaxWorkloadCount));
    }
    return w;
  }
  std::string known;
  for (const Builder& b : builders()) known += (known.empty() ? "" : ", ") + b.entry.name;
  throw std::invalid_argument(fmt::format("unknown workload '{}' (known: {})", name, known));
}

std::string describe_layer(const Layer& l, size_t index) {
  const auto at = [&](const std::string& what) { return fmt::format("layer {} ({})", index, what); };
  switch (l.kind) {
    case LayerKind::kLinear:
      return at(fmt::format("Linear {}->{}", l.in, l.out));
    case LayerKind::kConv2d:
      return at(fmt::format("Conv2d {}->{} k{} s{} p{}", l.in, l.out, l.kernel, l.stride, l.padding));
    case LayerKind::kMaxPool2d:
      return at(fmt::format("MaxPool2d k{} s{} p{}", l.kernel, l.stride, l.padding));
    case LayerKind::kGlobalAvgPool:
      return at("GlobalAvgPool");
    case LayerKind::kReLU:
      return at("ReLU");
    case LayerKind::kSigmoid:
      return at("Sigmoid");
    case LayerKind::kTanh:
      return at("Tanh");
    case LayerKind::kDropout:
      return at(fmt::format("Dropout {}", l.p));
    case LayerKind::kBatchNorm2d:
      return at(fmt::format("BatchNorm2d {}", l.in));
    case LayerKind::kBottleneck:
      return at(fmt::format("Bottleneck {}->{}->{} s{}", l.in, l.mid, l.out, l.stride));
    case LayerKind::kFlatten:
      return at("Flatten");
    case LayerKind::kEmbedding:
      return at(fmt::format("Embedding {}x{}", l.in, l.out));
    case LayerKind::kLstm:
      return at(fmt::format("LSTM {}->{} x{}", l.in, l.out, l.num_layers));
  }
  return at("unknown");
}

}  // namespace dlscale
