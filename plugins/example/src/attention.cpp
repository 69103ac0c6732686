#include "attention.hpp"

#include <backplane/plugin_sdk.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

namespace example_npu {
namespace {

// DLPack 0.8 added kDLBool (6); older headers (Debian's 0.6) do not name it.
constexpr uint8_t kBoolCode = 6;

struct View {  // a 4-d tensor, broadcast sizes have stride 0
  const DLTensor* tensor = nullptr;
  int64_t size[4] = {1, 1, 1, 1};
  int64_t stride[4] = {0, 0, 0, 0};
  char* base() const { return static_cast<char*>(tensor->data) + tensor->byte_offset; }
  int64_t offset(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return b * stride[0] + h * stride[1] + i * stride[2] + j * stride[3];
  }
};

bool is_float32(const DLDataType& t) {
  return t.code == kDLFloat && t.bits == 32 && t.lanes == 1;
}

std::string describe(const DLDataType& t) {
  return "code " + std::to_string(t.code) + ", " + std::to_string(t.bits) + " bits, " +
         std::to_string(t.lanes) + " lanes";
}

// Checks what every tensor needs; fills `view` with its 4 dims (right-aligned when ndim < 4).
std::string check_tensor(const char* name, const DLTensor* t, bool mask, View* view) {
  const std::string n(name);
  if (t == nullptr) return n + " is NULL";
  if (t->data == nullptr) return n + " has no data (NULL data pointer)";
  if (t->device.device_type != kDLCPU) {
    return n + " is on DLPack device type " + std::to_string(t->device.device_type) +
           "; the Example NPU reads host memory: kDLCPU tensors only";
  }
  const int min_ndim = mask ? 2 : 4;
  if (t->ndim < min_ndim || t->ndim > 4) {
    return n + " has " + std::to_string(t->ndim) + " dims; expected " +
           (mask ? "2 to 4 (broadcast to [batch, heads, seq_q, seq_k])" : "4");
  }
  if (mask) {
    const bool boolean = (t->dtype.code == kBoolCode || t->dtype.code == kDLUInt) &&
                         t->dtype.bits == 8 && t->dtype.lanes == 1;
    if (!boolean && !is_float32(t->dtype)) {
      return n + " has dtype " + describe(t->dtype) + "; expected bool or float32";
    }
  } else if (!is_float32(t->dtype)) {
    return n + " has dtype " + describe(t->dtype) + "; the Example NPU computes float32 only";
  }
  view->tensor = t;
  const int skip = 4 - t->ndim;
  int64_t compact = 1;
  for (int d = t->ndim - 1; d >= 0; --d) {
    const int64_t size = t->shape[d];
    if (size < 0) return n + " has a negative size";
    view->size[skip + d] = size;
    view->stride[skip + d] = t->strides != nullptr ? t->strides[d] : compact;
    compact *= size;
  }
  return {};
}

std::string shape_text(const View& v) {
  return "[" + std::to_string(v.size[0]) + ", " + std::to_string(v.size[1]) + ", " +
         std::to_string(v.size[2]) + ", " + std::to_string(v.size[3]) + "]";
}

std::string check_shapes(View& q, View& k, View& v, View& out, View* mask) {
  const int64_t batch = q.size[0], heads = q.size[1], seq_q = q.size[2], dim = q.size[3];
  if (k.size[0] != batch || v.size[0] != batch || k.size[3] != dim || v.size[3] != dim ||
      k.size[1] != v.size[1] || k.size[2] != v.size[2]) {
    return "key " + shape_text(k) + " and value " + shape_text(v) + " do not match query " +
           shape_text(q) + ": expected [batch, heads_kv, seq_k, head_dim] for both";
  }
  if (k.size[1] == 0 || heads % k.size[1] != 0) {
    return "query's " + std::to_string(heads) + " heads are not a multiple of key's " +
           std::to_string(k.size[1]);
  }
  if (dim == 0 || dim > kMaxHeadDim) {
    return "head_dim " + std::to_string(dim) + " is outside 1.." + std::to_string(kMaxHeadDim);
  }
  for (int d = 0; d < 4; ++d) {
    if (out.size[d] != q.size[d]) {
      return "output " + shape_text(out) + " is not the shape of query " + shape_text(q);
    }
  }
  if (q.stride[3] != 1 || k.stride[3] != 1 || v.stride[3] != 1 || out.stride[3] != 1) {
    return "the last dim of query, key, value and output must be contiguous (stride 1)";
  }
  if (mask != nullptr) {
    const int64_t full[4] = {batch, heads, seq_q, k.size[2]};
    for (int d = 0; d < 4; ++d) {
      if (mask->size[d] == 1) {
        mask->stride[d] = 0;
      } else if (mask->size[d] != full[d]) {
        return "mask " + shape_text(*mask) + " does not broadcast to [" + std::to_string(batch) +
               ", " + std::to_string(heads) + ", " + std::to_string(seq_q) + ", " +
               std::to_string(k.size[2]) + "]";
      }
    }
  }
  return {};
}

}  // namespace

std::string attention_forward(const bp_attention_args& args) {
  if (std::string why = backplane::sdk::args_size_error(
          "attention_forward", &args, BP_ATTENTION_ARGS_SIZE_1_3, "1.3", "bp_attention_args");
      !why.empty()) {
    return why;
  }
  View q, k, v, out, mask;
  for (auto [name, tensor, view] :
       {std::tuple{"query", args.query, &q}, std::tuple{"key", args.key, &k},
        std::tuple{"value", args.value, &v}, std::tuple{"output", args.output, &out}}) {
    if (std::string error = check_tensor(name, tensor, false, view); !error.empty()) return error;
  }
  const bool has_mask = args.mask != nullptr;
  if (has_mask) {
    if (std::string error = check_tensor("mask", args.mask, true, &mask); !error.empty()) {
      return error;
    }
  }
  if (std::string error = check_shapes(q, k, v, out, has_mask ? &mask : nullptr); !error.empty()) {
    return error;
  }

  const int64_t heads_per_kv = q.size[1] / k.size[1];
  const int64_t seq_q = q.size[2], seq_k = k.size[2], dim = q.size[3];
  const double scale = args.scale > 0 ? args.scale : 1.0 / std::sqrt(static_cast<double>(dim));
  const bool bool_mask = has_mask && !is_float32(args.mask->dtype);
  std::vector<float> scores(static_cast<size_t>(seq_k));
  std::vector<float> row(static_cast<size_t>(dim));
  const auto* qd = reinterpret_cast<const float*>(q.base());
  const auto* kd = reinterpret_cast<const float*>(k.base());
  const auto* vd = reinterpret_cast<const float*>(v.base());
  auto* od = reinterpret_cast<float*>(out.base());
  for (int64_t b = 0; b < q.size[0]; ++b) {
    for (int64_t h = 0; h < q.size[1]; ++h) {
      const int64_t hk = h / heads_per_kv;
      for (int64_t i = 0; i < seq_q; ++i) {
        // Causal, aligned bottom-right: query i sees keys up to i + (seq_k - seq_q).
        const int64_t last = args.causal ? i + (seq_k - seq_q) : seq_k - 1;
        float max_score = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < seq_k; ++j) {
          float s = -std::numeric_limits<float>::infinity();
          bool keep = j <= last;
          float bias = 0.0f;
          if (keep && has_mask) {
            const char* m = mask.base();
            const int64_t at = mask.offset(b, h, i, j);
            if (bool_mask) {
              keep = m[at] != 0;
            } else {
              bias = reinterpret_cast<const float*>(m)[at];
            }
          }
          if (keep) {
            double dot = 0.0;
            for (int64_t d = 0; d < dim; ++d) {
              dot += static_cast<double>(qd[q.offset(b, h, i, d)]) *
                     static_cast<double>(kd[k.offset(b, hk, j, d)]);
            }
            s = static_cast<float>(dot * scale) + bias;
          }
          scores[static_cast<size_t>(j)] = s;
          max_score = std::max(max_score, s);
        }
        std::fill(row.begin(), row.end(), 0.0f);
        // A row whose every key is masked out has no softmax: its output is zeros.
        if (max_score != -std::numeric_limits<float>::infinity()) {
          double total = 0.0;
          for (float& s : scores) {
            s = std::exp(s - max_score);
            total += s;
          }
          for (int64_t j = 0; j < seq_k; ++j) {
            const float p = static_cast<float>(scores[static_cast<size_t>(j)] / total);
            for (int64_t d = 0; d < dim; ++d) {
              row[static_cast<size_t>(d)] += p * vd[v.offset(b, hk, j, d)];
            }
          }
        }
        for (int64_t d = 0; d < dim; ++d) od[out.offset(b, h, i, d)] = row[static_cast<size_t>(d)];
      }
    }
  }
  return {};
}

}  // namespace example_npu
