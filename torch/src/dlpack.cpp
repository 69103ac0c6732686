// Zero-copy torch::Tensor <-> DLPack (dlpack.hpp). Written here rather than through
// at::toDLPack/at::fromDLPack: their signatures and DLPack versions differ between LibTorch 1.13
// and 2.x, and neither reports errors in backplane's terms.
#include <backplane/error.hpp>
#include <backplane/torch/device.hpp>
#include <backplane/torch/dlpack.hpp>

#include <ATen/ops/from_blob.h>

#include <cctype>
#include <memory>
#include <sstream>
#include <utility>

namespace backplane::torch {
namespace {

// DLPack 0.8 added kDLBool (6); Debian's header (0.6) predates it.
constexpr uint8_t kDLBoolCode = 6;

struct DtypeName {
  at::ScalarType torch;
  DLDataType dlpack;
  const char* name;
};

const DtypeName kDtypes[] = {
    {at::kFloat, {kDLFloat, 32, 1}, "float32"}, {at::kDouble, {kDLFloat, 64, 1}, "float64"},
    {at::kHalf, {kDLFloat, 16, 1}, "float16"},  {at::kBFloat16, {kDLBfloat, 16, 1}, "bfloat16"},
    {at::kBool, {kDLBoolCode, 8, 1}, "bool"},   {at::kByte, {kDLUInt, 8, 1}, "uint8"},
    {at::kChar, {kDLInt, 8, 1}, "int8"},        {at::kShort, {kDLInt, 16, 1}, "int16"},
    {at::kInt, {kDLInt, 32, 1}, "int32"},       {at::kLong, {kDLInt, 64, 1}, "int64"},
};

bool same(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

std::string supported_dtypes() {
  std::string out;
  for (const DtypeName& d : kDtypes) {
    if (!out.empty()) out += ", ";
    out += d.name;
  }
  return out;
}

template <typename T>
std::string str(const T& value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

// What the DataPtr deleter of a wrapped DLTensor runs. Armed only once from_blob has returned,
// so that a failure inside from_blob (which may destroy the DataPtr it made) releases nothing:
// the caller still owns the memory then.
struct Release {
  std::function<void()> run;
  bool armed = false;
};

at::Tensor wrap(const DLTensor& t, std::function<void()> on_release) {
  if (t.ndim < 0) {
    throw InvalidArgument("DLPack tensor has ndim " + std::to_string(t.ndim));
  }
  if (t.ndim > 0 && t.shape == nullptr) {
    throw InvalidArgument("DLPack tensor has ndim " + std::to_string(t.ndim) + " but no shape");
  }
  const at::ScalarType dtype = torch_dtype(t.dtype);
  const c10::Device device = torch_device(backplane_device(t.device));
  const auto ndim = static_cast<size_t>(t.ndim);
  std::vector<int64_t> sizes(t.shape, t.shape + ndim);
  std::vector<int64_t> strides(ndim);
  int64_t numel = 1;
  for (size_t i = 0; i < ndim; ++i) {
    if (sizes[i] < 0) {
      throw InvalidArgument("DLPack tensor has size " + std::to_string(sizes[i]) +
                            " in dimension " + std::to_string(i));
    }
    numel *= sizes[i];
  }
  if (t.strides != nullptr) {
    for (size_t i = 0; i < ndim; ++i) {
      strides[i] = t.strides[i];
      if (strides[i] < 0) {
        throw InvalidArgument("DLPack tensor has stride " + std::to_string(strides[i]) +
                              " in dimension " + std::to_string(i) +
                              "; LibTorch tensors cannot have negative strides");
      }
    }
  } else {  // compact row-major
    int64_t stride = 1;
    for (size_t i = ndim; i-- > 0;) {
      strides[i] = stride;
      stride *= std::max<int64_t>(sizes[i], 1);
    }
  }
  if (t.data == nullptr && numel > 0) {
    throw InvalidArgument("DLPack tensor of " + std::to_string(numel) + " elements has no data");
  }
  void* data = t.data == nullptr ? nullptr : static_cast<char*>(t.data) + t.byte_offset;

  auto release = std::make_shared<Release>();
  release->run = std::move(on_release);
  at::Tensor out = at::from_blob(
      data, sizes, strides,
      [release](void*) {
        if (release->armed && release->run) release->run();
      },
      at::TensorOptions().dtype(dtype).device(device), device);
  release->armed = true;
  return out;
}

// A DLManagedTensor and the view whose arrays it points into, freed together.
struct ManagedView {
  explicit ManagedView(const at::Tensor& tensor) : view(tensor) {
    managed.dl_tensor = view.dl();
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) {
      delete static_cast<ManagedView*>(self->manager_ctx);
    };
  }
  DLTensorView view;
  DLManagedTensor managed{};
};

}  // namespace

DLDataType dlpack_dtype(at::ScalarType type) {
  for (const DtypeName& d : kDtypes) {
    if (d.torch == type) return d.dlpack;
  }
  throw InvalidArgument(
      "dtype " + dtype_name(type) +
      " has no DLPack mapping in backplane::torch; supported: " + supported_dtypes());
}

at::ScalarType torch_dtype(DLDataType type) {
  for (const DtypeName& d : kDtypes) {
    if (same(d.dlpack, type)) return d.torch;
  }
  throw InvalidArgument(
      "DLPack dtype " + dtype_name(type) +
      " has no LibTorch mapping in backplane::torch; supported: " + supported_dtypes());
}

std::string dtype_name(at::ScalarType type) {
  for (const DtypeName& d : kDtypes) {
    if (d.torch == type) return d.name;
  }
  // The ones without a DLPack mapping here, by torch's Python names.
  switch (type) {
    case at::kComplexHalf:
      return "complex32";
    case at::kComplexFloat:
      return "complex64";
    case at::kComplexDouble:
      return "complex128";
    default:
      break;
  }
  std::string name = c10::toString(type);  // "Float8_e4m3fn" -> "float8_e4m3fn"
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

std::string dtype_name(DLDataType type) {
  for (const DtypeName& d : kDtypes) {
    if (same(d.dlpack, type)) return d.name;
  }
  return "code " + std::to_string(type.code) + ", " + std::to_string(type.bits) + " bits, " +
         std::to_string(type.lanes) + " lanes";
}

DLTensorView::DLTensorView(const at::Tensor& tensor, const char* name) : tensor_(tensor) {
  const std::string what = name;
  if (!tensor.defined()) throw InvalidArgument(what + " is an undefined tensor");
  if (tensor.layout() != at::kStrided) {
    throw InvalidArgument(what + " has layout " + str(tensor.layout()) +
                          "; DLPack views need a strided (dense) tensor");
  }
  if (tensor.is_conj()) {
    throw InvalidArgument(what + " has its conjugate bit set; call resolve_conj() first");
  }
  if (tensor.is_neg()) {
    throw InvalidArgument(what + " has its negative bit set; call resolve_neg() first");
  }
  try {
    dl_.dtype = dlpack_dtype(tensor.scalar_type());
    dl_.device = dlpack_device(backplane_device(tensor.device()));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(what + ": " + e.what());
  }
  const auto ndim = static_cast<size_t>(tensor.dim());
  dims_.resize(2 * ndim);
  for (size_t i = 0; i < ndim; ++i) {
    dims_[i] = tensor.size(static_cast<int64_t>(i));
    dims_[ndim + i] = tensor.stride(static_cast<int64_t>(i));
  }
  dl_.data = tensor.data_ptr();  // the storage offset included
  dl_.ndim = static_cast<int32_t>(ndim);
  dl_.shape = dims_.data();
  dl_.strides = dims_.data() + ndim;
  dl_.byte_offset = 0;
}

DLManagedTensor* to_dlpack(const at::Tensor& tensor) {
  return &(new ManagedView(tensor))->managed;
}

at::Tensor from_dlpack(DLManagedTensor* managed) {
  if (managed == nullptr) throw InvalidArgument("from_dlpack: the DLManagedTensor is null");
  return wrap(managed->dl_tensor, [managed] {
    if (managed->deleter != nullptr) managed->deleter(managed);
  });
}

at::Tensor from_dlpack(const DLTensor& tensor, std::function<void()> on_release) {
  return wrap(tensor, std::move(on_release));
}

}  // namespace backplane::torch
