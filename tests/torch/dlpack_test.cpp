// Zero-copy torch::Tensor <-> DLPack: dtype table, views of contiguous, strided and offset
// tensors, round trips for every dtype, shared memory both ways, lifetimes, errors.
#include <backplane/error.hpp>
#include <backplane/torch/dlpack.hpp>

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using backplane::InvalidArgument;
using namespace backplane::torch;

struct DtypeCase {
  at::ScalarType torch;
  DLDataType dlpack;
  const char* name;
};

const DtypeCase kDtypes[] = {
    {at::kFloat, {kDLFloat, 32, 1}, "float32"},
    {at::kDouble, {kDLFloat, 64, 1}, "float64"},
    {at::kHalf, {kDLFloat, 16, 1}, "float16"},
    {at::kBFloat16, {kDLBfloat, 16, 1}, "bfloat16"},
    {at::kBool, {6, 8, 1}, "bool"},
    {at::kByte, {kDLUInt, 8, 1}, "uint8"},
    {at::kChar, {kDLInt, 8, 1}, "int8"},
    {at::kShort, {kDLInt, 16, 1}, "int16"},
    {at::kInt, {kDLInt, 32, 1}, "int32"},
    {at::kLong, {kDLInt, 64, 1}, "int64"},
};

std::vector<int64_t> shape_of(const DLTensor& t) {
  return {t.shape, t.shape + t.ndim};
}
std::vector<int64_t> strides_of(const DLTensor& t) {
  return {t.strides, t.strides + t.ndim};
}

// 0, 1, 2, ... in `dtype` (bool: alternating), shaped [2, 3, 4].
at::Tensor numbered(at::ScalarType dtype) {
  at::Tensor t = at::arange(24, at::TensorOptions(at::kLong)).reshape({2, 3, 4});
  if (dtype == at::kBool) return (t % 2).to(at::kBool);
  return t.to(dtype);
}

TEST(DLPackDtype, TableBothWays) {
  for (const DtypeCase& c : kDtypes) {
    SCOPED_TRACE(c.name);
    const DLDataType dl = dlpack_dtype(c.torch);
    EXPECT_EQ(dl.code, c.dlpack.code);
    EXPECT_EQ(dl.bits, c.dlpack.bits);
    EXPECT_EQ(dl.lanes, c.dlpack.lanes);
    EXPECT_EQ(torch_dtype(c.dlpack), c.torch);
    EXPECT_EQ(dtype_name(c.dlpack), c.name);
  }
}

TEST(DLPackDtype, MessagesNameDtypesAsTorchDoes) {
  const std::pair<at::ScalarType, const char*> names[] = {
      {at::kFloat, "float32"},         {at::kInt, "int32"},         {at::kLong, "int64"},
      {at::kHalf, "float16"},          {at::kBFloat16, "bfloat16"}, {at::kBool, "bool"},
      {at::kComplexFloat, "complex64"}};
  for (const auto& [type, name] : names) EXPECT_EQ(dtype_name(type), name);
}

TEST(DLPackDtype, UnsupportedOnesNameWhatIsAccepted) {
  const std::string supported =
      "supported: float32, float64, float16, bfloat16, bool, uint8, int8, int16, int32, int64";
  try {
    dlpack_dtype(at::kComplexFloat);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "dtype complex64 has no DLPack mapping in backplane::torch; " + supported);
  }
  try {
    torch_dtype(DLDataType{kDLFloat, 32, 4});
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "DLPack dtype code 2, 32 bits, 4 lanes has no LibTorch mapping in backplane::torch; " +
            supported);
  }
}

constexpr int64_t kNoData = -1;

struct LayoutCase {
  const char* name;
  at::Tensor tensor;
  std::vector<int64_t> shape, strides;
  int64_t offset_elements;  // from the base tensor's first element, or kNoData
};

TEST(DLPackView, PointsAtTheTensorsElements) {
  const at::Tensor base = numbered(at::kFloat);  // [2, 3, 4]
  const LayoutCase cases[] = {
      {"contiguous", base, {2, 3, 4}, {12, 4, 1}, 0},
      {"transposed", base.transpose(0, 2), {4, 3, 2}, {1, 4, 12}, 0},
      {"storage offset", base.select(0, 1).narrow(1, 1, 2), {3, 2}, {4, 1}, 13},
      {"broadcast", base.select(0, 0).select(0, 2).expand({5, 4}), {5, 4}, {0, 1}, 8},
      {"0-size", base.narrow(1, 3, 0), {2, 0, 4}, {12, 4, 1}, kNoData},
      {"0-d", base.select(0, 1).select(0, 2).select(0, 3), {}, {}, 23},
  };
  for (const LayoutCase& c : cases) {
    SCOPED_TRACE(c.name);
    const DLTensorView view(c.tensor);
    const DLTensor& dl = view.dl();
    // LibTorch gives no data pointer for a tensor without elements.
    EXPECT_EQ(dl.data, c.offset_elements == kNoData
                           ? nullptr
                           : static_cast<void*>(base.data_ptr<float>() + c.offset_elements));
    EXPECT_EQ(dl.byte_offset, 0u);
    EXPECT_EQ(shape_of(dl), c.shape);
    EXPECT_EQ(strides_of(dl), c.strides);
    EXPECT_EQ(dl.device.device_type, kDLCPU);
    EXPECT_EQ(dl.device.device_id, 0);
    EXPECT_EQ(dtype_name(dl.dtype), "float32");
  }
}

TEST(DLPackView, RoundTripEveryDtypeAndLayoutWithoutCopies) {
  for (const DtypeCase& d : kDtypes) {
    const at::Tensor base = numbered(d.torch);
    const at::Tensor layouts[] = {base, base.transpose(0, 2), base.select(0, 1).narrow(1, 1, 2),
                                  base.narrow(1, 3, 0)};
    for (const at::Tensor& t : layouts) {
      SCOPED_TRACE(std::string(d.name) + " " + std::to_string(t.dim()) + "-D, strides " +
                   std::to_string(t.stride(0)));
      const DLTensorView view(t);
      const at::Tensor back = from_dlpack(view.dl());
      EXPECT_EQ(back.scalar_type(), d.torch);
      EXPECT_EQ(back.sizes(), t.sizes());
      EXPECT_EQ(back.strides(), t.strides());
      EXPECT_EQ(back.data_ptr(), t.data_ptr());
      EXPECT_TRUE(back.equal(t));
    }
  }
}

TEST(DLPackView, WritesAreVisibleBothWays) {
  at::Tensor t = at::zeros({6}, at::TensorOptions(at::kFloat));
  const DLTensorView view(t);
  static_cast<float*>(view.dl().data)[2] = 5.0f;
  EXPECT_EQ(t[2].item<float>(), 5.0f);

  at::Tensor back = from_dlpack(view.dl());
  back[3] = 9.0f;
  EXPECT_EQ(t[3].item<float>(), 9.0f);
  t[4] = 7.0f;
  EXPECT_EQ(back[4].item<float>(), 7.0f);
}

TEST(DLPackWrap, ForeignMemoryIsSharedAndReleasedOnce) {
  std::vector<float> memory = {1, 2, 3, 4, 5, 6, 7};  // the view reads elements 1 to 6
  int64_t shape[] = {2, 3};
  int64_t strides[] = {1, 2};  // column-major
  DLTensor dl{};
  dl.data = memory.data();
  dl.device = {kDLCPU, 0};
  dl.ndim = 2;
  dl.dtype = {kDLFloat, 32, 1};
  dl.shape = shape;
  dl.strides = strides;
  dl.byte_offset = sizeof(float);  // starts at the second element
  int released = 0;
  {
    at::Tensor t = from_dlpack(dl, [&] { ++released; });
    EXPECT_EQ(t.data_ptr(), static_cast<void*>(memory.data() + 1));
    EXPECT_EQ(t[1][0].item<float>(), 3.0f);  // element (1, 0): offset 1 + 1 * 1
    t.add_(10.0f);
    memory[1] = -1.0f;
    EXPECT_EQ(t[0][0].item<float>(), -1.0f);
    const at::Tensor sharing = t.t();
    t = at::Tensor();
    EXPECT_EQ(released, 0) << "released while a view still shares the storage";
    EXPECT_EQ(sharing[0][1].item<float>(), 13.0f);
  }
  EXPECT_EQ(released, 1);
  EXPECT_EQ(memory[2], 13.0f);  // the in-place add reached the foreign memory
}

TEST(DLPackWrap, CompactWhenStridesAreNullAndEmptyWithoutData) {
  std::vector<int32_t> memory(12);
  int64_t shape[] = {3, 4};
  DLTensor dl{};
  dl.data = memory.data();
  dl.device = {kDLCPU, 0};
  dl.ndim = 2;
  dl.dtype = {kDLInt, 32, 1};
  dl.shape = shape;
  const at::Tensor t = from_dlpack(dl);
  EXPECT_EQ(t.strides(), at::IntArrayRef({4, 1}));

  int64_t empty_shape[] = {0, 5};
  DLTensor empty = dl;
  empty.data = nullptr;
  empty.shape = empty_shape;
  const at::Tensor e = from_dlpack(empty);
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.sizes(), at::IntArrayRef({0, 5}));
}

// A DLManagedTensor over a vector that counts its deleter's runs.
struct Counted {
  std::vector<float> memory = std::vector<float>(4, 1.0f);
  int64_t shape[1] = {4};
  int deleted = 0;
  DLManagedTensor managed{};
  Counted() {
    managed.dl_tensor.data = memory.data();
    managed.dl_tensor.device = {kDLCPU, 0};
    managed.dl_tensor.ndim = 1;
    managed.dl_tensor.dtype = {kDLFloat, 32, 1};
    managed.dl_tensor.shape = shape;
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) {
      ++static_cast<Counted*>(self->manager_ctx)->deleted;
    };
  }
};

TEST(DLPackManaged, FromDLPackTakesOwnershipAndDeletesOnce) {
  Counted counted;
  {
    at::Tensor t = from_dlpack(&counted.managed);
    const at::Tensor half = t.narrow(0, 0, 2);
    t = at::Tensor();
    EXPECT_EQ(counted.deleted, 0);
    EXPECT_EQ(half.data_ptr(), static_cast<void*>(counted.memory.data()));
  }
  EXPECT_EQ(counted.deleted, 1);
}

TEST(DLPackManaged, OnErrorTheCallerKeepsOwnership) {
  Counted counted;
  counted.managed.dl_tensor.dtype = {kDLComplex, 64, 1};
  EXPECT_THROW(from_dlpack(&counted.managed), InvalidArgument);
  counted.managed.dl_tensor.dtype = {kDLFloat, 32, 1};
  counted.managed.dl_tensor.device = {kDLCUDAHost, 0};
  EXPECT_THROW(from_dlpack(&counted.managed), InvalidArgument);
  EXPECT_EQ(counted.deleted, 0);
  EXPECT_THROW(from_dlpack(nullptr), InvalidArgument);
}

TEST(DLPackManaged, ToDLPackHoldsTheTensorUntilItsDeleterRuns) {
  at::Tensor t = numbered(at::kFloat).transpose(0, 1);
  const int64_t alone = t.use_count();
  DLManagedTensor* managed = to_dlpack(t);
  EXPECT_EQ(t.use_count(), alone + 1);
  EXPECT_EQ(managed->dl_tensor.data, t.data_ptr());
  EXPECT_EQ(strides_of(managed->dl_tensor), std::vector<int64_t>({4, 12, 1}));

  // Handed to a consumer that takes ownership: from_dlpack runs the deleter when done.
  at::Tensor consumer = from_dlpack(managed);
  EXPECT_EQ(consumer.data_ptr(), t.data_ptr());
  EXPECT_EQ(t.use_count(), alone + 1);
  consumer = at::Tensor();
  EXPECT_EQ(t.use_count(), alone);
}

TEST(DLPackView, KeepsTheTensorAliveAfterItsLastHandleGoes) {
  DLTensorView view = [] {
    const at::Tensor t = numbered(at::kFloat);
    return DLTensorView(t);
  }();
  EXPECT_EQ(view.tensor().use_count(), 1);  // only the view holds it now
  EXPECT_EQ(static_cast<const float*>(view.dl().data)[23], 23.0f);
  const DLTensorView moved = std::move(view);
  EXPECT_EQ(shape_of(moved.dl()), std::vector<int64_t>({2, 3, 4}));
  EXPECT_EQ(static_cast<const float*>(moved.dl().data)[5], 5.0f);
}

TEST(DLPackView, TensorsWithoutADLPackViewAreErrors) {
  struct Case {
    const char* what;
    at::Tensor tensor;
    std::string message;
  };
  const at::Tensor complex = at::zeros({2}, at::TensorOptions(at::kComplexFloat));
  const Case cases[] = {
      {"undefined", at::Tensor(), "mask is an undefined tensor"},
      {"sparse", numbered(at::kFloat).to_sparse(),
       "mask has layout Sparse; DLPack views need a strided (dense) tensor"},
      {"conjugated", complex.conj(), "mask has its conjugate bit set; call resolve_conj() first"},
      {"complex", complex,
       "mask: dtype complex64 has no DLPack mapping in backplane::torch; supported: float32, "
       "float64, float16, bfloat16, bool, uint8, int8, int16, int32, int64"},
      {"meta", at::empty({2}, at::TensorOptions(at::kFloat).device(at::kMeta)),
       "mask: device 'meta' has no DLPack device type; DLPack names cpu, cuda, rocm, xpu, mps"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    try {
      DLTensorView view(c.tensor, "mask");
      ADD_FAILURE() << "viewed";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()), c.message);
    }
  }
}

TEST(DLPackWrap, DLTensorsLibTorchCannotHoldAreErrors) {
  float memory[4] = {};
  int64_t shape[] = {2, 2};
  int64_t negative[] = {-2, 1};
  DLTensor dl{};
  dl.data = memory;
  dl.device = {kDLCPU, 0};
  dl.ndim = 2;
  dl.dtype = {kDLFloat, 32, 1};
  dl.shape = shape;
  dl.strides = negative;
  bool released = false;
  try {
    from_dlpack(dl, [&] { released = true; });
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "DLPack tensor has stride -2 in dimension 0; LibTorch tensors cannot have negative "
              "strides");
  }
  dl.strides = nullptr;
  dl.data = nullptr;
  try {
    from_dlpack(dl, [&] { released = true; });
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), "DLPack tensor of 4 elements has no data");
  }
  EXPECT_FALSE(released);
}

}  // namespace
