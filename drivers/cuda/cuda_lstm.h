// Stacked LSTMs on cuDNN's RNN API (v8). cuDNN keeps an LSTM's weights in its own "weight
// space"; the model places that space, as one block, in its flat parameter buffer, and maps the
// canonical tensors (w_ih, w_hh, bias per layer, gates i,f,g,o) to and from it. Under bf16 the
// weight space, the data and the states are bf16 and cuDNN computes in fp32; the flat fp32
// buffer then holds the weight space value for value, so that the step's bf16 copy of the
// parameters holds cuDNN's bf16 weight space at the same offset.
#pragma once

#include <memory>
#include <vector>

#include "drivers/cuda/cuda_layers.h"

namespace dlscale::cuda {

/// One contiguous run of a canonical tensor inside the driver's flat layout (offsets in floats).
struct WeightPiece {
  int64_t canonical = 0, driver = 0, count = 0;
};

/// An LSTM layer's cuDNN weight space: its size in bytes and in values, and where every canonical
/// value lies in it (driver offsets, in values, relative to the weight space's start).
struct LstmWeightLayout {
  size_t bytes = 0;
  int64_t values = 0;
  std::vector<WeightPiece> pieces;
};

/// Asks cuDNN where it keeps each gate's matrices and biases for `l`, whose canonical tensors
/// start at `canonical_offset`.
LstmWeightLayout lstm_weight_layout(cudnnHandle_t cudnn, const Layer& l, int64_t canonical_offset, Precision precision);

/// The LSTM layer over a [batch, steps, l.in] input (batch-major, as every activation here).
std::unique_ptr<GpuLayer> make_lstm_layer(LayerContext& ctx, const Layer& l, int64_t batch, int64_t steps,
                                          const LayerParams& params);

}  // namespace dlscale::cuda
