// Shared helpers of the oneDNN driver: descriptors, buffers, staging reorders and error context.
#include "drivers/onednn/onednn_common.h"

#include <oneapi/dnnl/dnnl_debug.h>

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "drivers/driver.h"

namespace dlscale::onednn {

memory::desc plain_md(const memory::dims& dims) {
  memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return {dims, memory::data_type::f32, strides};
}

memory::desc with_type(const memory::desc& md, memory::data_type type) {
  memory::desc typed = md;
  typed.data.data_type = memory::convert_to_c(type);
  return typed;
}

int64_t product(const memory::dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

memory wrap(const Env& env, const memory::desc& md, void* data) { return {md, env.engine, data}; }

memory allocate(const Env& env, const memory::desc& md) {
  memory m(md, env.engine);
  // Blocked layouts pad channels up to the block; the padding must hold zeros, and a fresh
  // buffer is zeroed once so that loops over the whole buffer (dropout) never read garbage.
  zero(m);
  return m;
}

Tensor allocate_tensor(const Env& env, const memory::desc& md, bool with_grad) {
  Tensor t{allocate(env, md), {}};
  if (with_grad) t.grad = allocate(env, md);
  return t;
}

Tensor view(const Env& env, const Tensor& t, const memory::desc& md) {
  if (md.get_size() != t.value.get_desc().get_size()) throw std::logic_error("onednn view: sizes differ");
  Tensor v{wrap(env, md, t.value.get_data_handle()), {}};
  if (t.grad) v.grad = wrap(env, md, t.grad.get_data_handle());
  return v;
}

void zero(const memory& m) { std::memset(m.get_data_handle(), 0, m.get_desc().get_size()); }

void rethrow_with_context(const std::string& what, const dnnl::error& e) {
  const std::string message =
      fmt::format("oneDNN: {}: {} (status {})", what, e.what(), dnnl_status2str(static_cast<dnnl_status_t>(e.status)));
  if (e.status == dnnl_out_of_memory) throw OutOfMemory(message);
  throw std::runtime_error(message);
}

Staged::Staged(const Env& env, const memory& outer, const memory::desc& want, Flow flow) {
  if (outer.get_desc() == want) {
    inner_ = outer;
    return;
  }
  inner_ = allocate(env, want);
  const memory& src = flow == Flow::kIn ? outer : inner_;
  const memory& dst = flow == Flow::kIn ? inner_ : outer;
  reorder_ = dnnl::reorder(src, dst);
  args_ = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
}

void Staged::sync(const Env& env) const {
  if (reorder_) reorder_.execute(env.stream, args_);
}

StagedTensor::StagedTensor(const Env& env, const Tensor& outer, const memory::desc& want) {
  value_ = Staged(env, outer.value, want, Flow::kIn);
  inner_.value = value_.mem();
  if (outer.grad) {
    grad_ = Staged(env, outer.grad, want, Flow::kOut);
    inner_.grad = grad_.mem();
  }
}

}  // namespace dlscale::onednn
