// Attention through the installed backplane::torch on the cpu plugin, checked against LibTorch's
// own composite: softmax(q k^T / sqrt(head_dim)) v, with the key and value heads repeated for
// grouped-query attention. Exit 0 only when they agree.
#include <backplane/torch.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <iostream>

int main() {
  at::manual_seed(0);
  const int64_t heads_q = 4, heads_kv = 2, head_dim = 16;
  at::Tensor q = at::randn({2, heads_q, 5, head_dim});
  at::Tensor k = at::randn({2, heads_kv, 7, head_dim});
  at::Tensor v = at::randn({2, heads_kv, 7, head_dim});

  backplane::Runtime runtime = backplane::Runtime::open();
  backplane::torch::Attention attention(runtime, q.device());
  at::Tensor out = attention(q, k, v);

  at::Tensor k_rep = k.repeat_interleave(heads_q / heads_kv, 1);
  at::Tensor v_rep = v.repeat_interleave(heads_q / heads_kv, 1);
  double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  at::Tensor expected = at::softmax(at::matmul(q, k_rep.transpose(-2, -1)) * scale, -1);
  expected = at::matmul(expected, v_rep);

  double max_diff = (out - expected).abs().max().item<double>();
  std::cout << "implementation " << attention.implementation() << " plugin "
            << attention.kernel_info().plugin << " device " << attention.device().str()
            << " max_abs_diff " << max_diff << "\n";
  if (out.sizes() != expected.sizes() || !at::allclose(out, expected, 1e-5, 1e-5)) {
    std::cerr << "backplane::torch attention differs from LibTorch's composite\n";
    return 1;
  }
  return 0;
}
