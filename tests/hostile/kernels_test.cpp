// Hostile kernel arguments (README, "Hostile kernel inputs"): every kernel a user can reach on
// this machine's CPU, called the way users call it (attention through the cpu plugin and
// Runtime::attention_kernel, the layer kernels through the Hub package loader and the plugin
// ABI), with each bad argument the table below makes, applied to each argument it fits. Each
// call must come back as an error naming that argument, leave every buffer as it was, and a
// good call afterwards must still work. The few inputs the ABI documents as legal (attention's
// any strides, rms_norm in place) must work instead.
//
// HOSTILE_KERNELS_PRINT=1 prints each input's message (the README table is copied from it).
#include <backplane/backplane.hpp>
#include <backplane/hub/package.hpp>

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "in_tree_package.hpp"

namespace backplane::hostile {
namespace {

constexpr DLDataType kF32{kDLFloat, 32, 1};
constexpr float kCanary = -12345.5f;  // every element beyond the good values, and outputs

// A float32 tensor argument with twice the room its shape needs, so that the strided layouts
// the ABI allows stay inside the allocation.
struct Arg {
  std::string name;
  bool written = false;   // the kernel writes it (output, residual, rotary's query and key)
  bool optional = false;  // NULL means "none" (mask, residual, rotary's key)
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // empty: compact
  std::vector<float> storage;
  DLTensor dl{};
  const DLTensor* passed = &dl;  // what the call hands over; a row may make it NULL

  Arg(std::string n, std::vector<int64_t> dims, bool writes, bool may_be_null)
      : name(std::move(n)), written(writes), optional(may_be_null), shape(std::move(dims)) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    storage.assign(static_cast<size_t>(2 * count + 16), kCanary);
    for (int64_t i = 0; i < count; ++i) {
      storage[static_cast<size_t>(i)] =
          writes && name == "output" ? kCanary
                                     : static_cast<float>((i * 7 + name.size()) % 11) / 8.0f - 0.5f;
    }
    dl.data = storage.data();
    dl.device = {kDLCPU, 0};
    dl.ndim = static_cast<int32_t>(shape.size());
    dl.dtype = kF32;
    dl.shape = shape.data();
  }
  // Compact strides made explicit, for rows that change one of them.
  std::vector<int64_t>& explicit_strides() {
    if (strides.empty()) {
      strides.assign(shape.size(), 1);
      for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) {
        strides[static_cast<size_t>(i)] =
            strides[static_cast<size_t>(i) + 1] * shape[static_cast<size_t>(i) + 1];
      }
      dl.strides = strides.data();
    }
    return strides;
  }
  // The first dim of size > 1 (where a stride matters).
  int wide_dim() const {
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] > 1) return static_cast<int>(i);
    }
    return 0;
  }
};

// One kernel with good arguments it owns; run() returns "" on success, else the message.
struct KernelCall {
  std::string kernel;
  std::vector<std::unique_ptr<Arg>> args;
  std::function<std::string(KernelCall&)> run;
  // For each written argument, the input it may alias (exactly or partly) in the rows below.
  std::function<std::string(const std::string&)> partner;

  Arg& arg(const std::string& name) {
    for (auto& a : args) {
      if (a->name == name) return *a;
    }
    throw std::logic_error("no argument " + name);
  }
  const DLTensor* tensor(const std::string& name) { return arg(name).passed; }
  Arg& add(std::string name, std::vector<int64_t> dims, bool written = false,
           bool optional = false) {
    args.push_back(std::make_unique<Arg>(std::move(name), std::move(dims), written, optional));
    return *args.back();
  }
  std::vector<std::vector<float>> buffers() const {
    std::vector<std::vector<float>> out;
    for (const auto& a : args) out.push_back(a->storage);
    return out;
  }
};

// The kernels and how users reach them, opened once for the whole table.
class Kernels {
 public:
  static Kernels& get() {
    static Kernels kernels;
    return kernels;
  }
  // attention: "sdpa", "eager"; layer ops: rms_norm, rms_norm+residual, silu_and_mul,
  // gelu_and_mul, gelu_tanh_and_mul, rotary_neox, rotary_interleaved.
  static std::vector<std::string> names() {
    return {"attention/sdpa",    "attention/eager", "rms_norm",
            "rms_norm+residual", "silu_and_mul",    "gelu_and_mul",
            "gelu_tanh_and_mul", "rotary/neox",     "rotary/interleaved"};
  }

  KernelCall make(const std::string& kernel) {
    KernelCall c;
    c.kernel = kernel;
    if (kernel.rfind("attention/", 0) == 0) {
      c.add("query", {1, 2, 3, 8});
      c.add("key", {1, 1, 5, 8});
      c.add("value", {1, 1, 5, 8});
      c.add("mask", {3, 5}, false, true);  // additive float32
      c.add("output", {1, 2, 3, 8}, true);
      const AttentionKernel& k = kernel == "attention/sdpa" ? sdpa_ : eager_;
      c.run = [&k](KernelCall& call) -> std::string {
        bp_attention_args args{};
        args.struct_size = sizeof args;
        args.query = call.tensor("query");
        args.key = call.tensor("key");
        args.value = call.tensor("value");
        args.mask = call.tensor("mask");
        args.output = call.tensor("output");
        try {
          k(args);
          return "";
        } catch (const InvalidArgument& e) {
          return e.what();
        }
      };
      c.partner = [](const std::string&) { return std::string("query"); };
    } else if (kernel.rfind("rms_norm", 0) == 0) {
      c.add("input", {3, 16});
      c.add("weight", {16});
      if (kernel == "rms_norm+residual") c.add("residual", {3, 16}, true, true);
      c.add("output", {3, 16}, true);
      const auto fn = function<bp_rms_norm_fn>(rmsnorm_, "rms_norm");
      c.run = [fn, this, residual = kernel == "rms_norm+residual"](KernelCall& call) {
        bp_rms_norm_args args{};
        args.struct_size = sizeof args;
        args.input = call.tensor("input");
        args.weight = call.tensor("weight");
        args.residual = residual ? call.tensor("residual") : nullptr;
        args.output = call.tensor("output");
        args.epsilon = 1e-5;
        return hub::LoadedPackage::take_status(fn(context(rmsnorm_, "rms_norm"), &args));
      };
      c.partner = [](const std::string&) { return std::string("input"); };
    } else if (kernel.find("_and_mul") != std::string::npos) {
      c.add("input", {3, 16});
      c.add("output", {3, 8}, true);
      const auto fn = function<bp_gated_activation_fn>(activation_, kernel);
      c.run = [fn, this, kernel](KernelCall& call) {
        bp_gated_activation_args args{};
        args.struct_size = sizeof args;
        args.input = call.tensor("input");
        args.output = call.tensor("output");
        return hub::LoadedPackage::take_status(fn(context(activation_, kernel), &args));
      };
      c.partner = [](const std::string&) { return std::string("input"); };
    } else {
      c.add("query", {1, 2, 3, 8}, true);
      c.add("key", {1, 1, 3, 8}, true, true);
      c.add("cos", {3, 4});
      c.add("sin", {3, 4});
      const auto fn = function<bp_rotary_embedding_fn>(rotary_, "rotary_embedding");
      const int32_t style = kernel == "rotary/neox" ? BP_ROTARY_NEOX : BP_ROTARY_INTERLEAVED;
      c.run = [fn, this, style](KernelCall& call) {
        bp_rotary_embedding_args args{};
        args.struct_size = sizeof args;
        args.query = call.tensor("query");
        args.key = call.tensor("key");
        args.cos = call.tensor("cos");
        args.sin = call.tensor("sin");
        args.style = style;
        return hub::LoadedPackage::take_status(fn(context(rotary_, "rotary_embedding"), &args));
      };
      c.partner = [](const std::string& written) {
        return std::string(written == "query" ? "key" : "query");
      };
    }
    return c;
  }

 private:
  Kernels()
      : runtime_(open_runtime()),
        sdpa_(runtime_.attention_kernel(Device("cpu"), "sdpa")),
        eager_(runtime_.attention_kernel(Device("cpu"), "eager")),
        rmsnorm_(load("rmsnorm")),
        activation_(load("activation")),
        rotary_(load("rotary")) {}

  static Runtime open_runtime() {
    RuntimeOptions options;
    options.plugin_path = std::vector<std::filesystem::path>{PLUGIN_BUILD_DIR};
    options.only_plugins = std::vector<std::string>{"cpu"};
    options.log_sink = [](LogLevel, const std::string&) {};
    return Runtime::open(options);
  }
  static hub::LoadedPackage load(const std::string& name) {
    return testing::load_in_tree_package(PACKAGES_DIR, CPU_VARIANT, name);
  }
  template <typename Fn>
  static Fn function(const hub::LoadedPackage& package, const std::string& op) {
    const hub::PackageKernel* k = package.find(op, op);
    if (!k) throw std::logic_error("the package registers no " + op);
    return reinterpret_cast<Fn>(k->function);
  }
  static void* context(const hub::LoadedPackage& package, const std::string& op) {
    return package.find(op, op)->context;
  }

  Runtime runtime_;
  AttentionKernel sdpa_, eager_;
  hub::LoadedPackage rmsnorm_, activation_, rotary_;
};

// One hostile input. `fits` says which arguments it applies to; `mutate` makes it; `legal` the
// (kernel, argument) pairs the ABI documents as valid, which must work; otherwise the message
// must name the argument and contain `error`.
struct Hostile {
  const char* name;
  std::function<bool(const Arg&)> fits;
  std::function<void(KernelCall&, Arg&)> mutate;
  std::string error;
  std::function<bool(const std::string& kernel, const Arg&)> legal = nullptr;
};

// The test name's parameter, readable in ctest and GoogleTest output.
inline void PrintTo(const Hostile& x, std::ostream* os) {
  *os << x.name;
}

bool any(const Arg&) {
  return true;
}
bool is_attention(const std::string& kernel, const Arg&) {
  return kernel.rfind("attention/", 0) == 0;
}

const std::vector<Hostile>& table() {
  static const std::vector<Hostile> rows = {
      {"null tensor", [](const Arg& a) { return !a.optional; },
       [](KernelCall&, Arg& a) { a.passed = nullptr; }, "is NULL"},
      {"wrong rank", any, [](KernelCall&, Arg& a) { a.dl.ndim -= 1; }, ""},
      {"rank above 8", any, [](KernelCall&, Arg& a) { a.dl.ndim = 9; }, "must have"},
      {"negative dim", any, [](KernelCall&, Arg& a) { a.shape[0] = -1; }, "negative size"},
      {"zero dim", any, [](KernelCall&, Arg& a) { a.shape[0] = 0; }, ""},
      {"mismatched last dim", any, [](KernelCall&, Arg& a) { a.shape.back() += 1; }, ""},
      {"dims whose product overflows", any,
       [](KernelCall&, Arg& a) {
         a.shape[0] = int64_t{1} << 62;
         a.shape.back() = int64_t{1} << 62;
       },
       "int64"},
      {"stride whose span overflows", any,
       [](KernelCall&, Arg& a) { a.explicit_strides()[a.wide_dim()] = int64_t{1} << 62; }, "int64"},
      {"unsupported dtype int32", any,
       [](KernelCall&, Arg& a) {
         a.dl.dtype = {kDLInt, 32, 1};
       },
       "int32"},
      {"mixed dtypes (one bfloat16)", any,
       [](KernelCall&, Arg& a) {
         a.dl.dtype = {kDLBfloat, 16, 1};
       },
       "bfloat16"},
      {"dtype of 0 bits", any,
       [](KernelCall&, Arg& a) {
         a.dl.dtype = {kDLFloat, 0, 1};
       },
       "float0"},
      {"wrong device type (kDLCUDA)", any,
       [](KernelCall&, Arg& a) {
         a.dl.device = {kDLCUDA, 0};
       },
       "is on device kDLCUDA"},
      {"wrong device id (kDLCPU:1)", any,
       [](KernelCall&, Arg& a) {
         a.dl.device = {kDLCPU, 1};
       },
       "device_id 1"},
      {"null data pointer", any, [](KernelCall&, Arg& a) { a.dl.data = nullptr; }, "data is NULL"},
      {"misaligned data (byte_offset 1)", any, [](KernelCall&, Arg& a) { a.dl.byte_offset = 1; },
       "not aligned"},
      {"byte_offset that wraps the address space", any,
       [](KernelCall&, Arg& a) { a.dl.byte_offset = std::numeric_limits<uint64_t>::max() - 3; },
       "byte_offset"},
      {"byte_offset 2^62", any, [](KernelCall&, Arg& a) { a.dl.byte_offset = uint64_t{1} << 62; },
       "byte_offset"},
      {"negative stride below address 0", any,
       [](KernelCall&, Arg& a) { a.explicit_strides()[a.wide_dim()] = -(int64_t{1} << 50); },
       "below address 0"},
      {"every other element (strides doubled)", any,
       [](KernelCall&, Arg& a) {
         for (int64_t& stride : a.explicit_strides()) stride *= 2;
       },
       "contiguous", is_attention},
      {"reversed last dim (stride -1)", any,
       [](KernelCall&, Arg& a) {
         a.explicit_strides().back() = -1;
         a.dl.byte_offset = static_cast<uint64_t>(a.shape.back() - 1) * sizeof(float);
       },
       "contiguous", is_attention},
      {"written with stride 0", [](const Arg& a) { return a.written; },
       [](KernelCall&, Arg& a) { a.explicit_strides()[a.wide_dim()] = 0; }, "stride 0"},
      {"written over its input, one element on", [](const Arg& a) { return a.written; },
       [](KernelCall& c, Arg& a) { a.dl.data = c.arg(c.partner(a.name)).storage.data() + 1; },
       "overlap"},
      {"written exactly over its input", [](const Arg& a) { return a.written; },
       [](KernelCall& c, Arg& a) {
         const Arg& p = c.arg(c.partner(a.name));
         a.dl = p.dl;
         a.shape = p.shape;
         a.dl.shape = a.shape.data();
       },
       "",
       [](const std::string& kernel, const Arg& a) {
         return kernel.rfind("rms_norm", 0) == 0 && a.name == "output";  // in place (plugin.h)
       }},
  };
  return rows;
}

bool print_messages() {
  const char* flag = std::getenv("HOSTILE_KERNELS_PRINT");
  return flag && *flag && std::string(flag) != "0";
}

class HostileKernelInputs : public ::testing::TestWithParam<Hostile> {};

TEST_P(HostileKernelInputs, AreRefusedNamingTheArgument) {
  const Hostile& row = GetParam();
  int applied = 0;
  for (const std::string& kernel : Kernels::names()) {
    const size_t arg_count = Kernels::get().make(kernel).args.size();
    for (size_t i = 0; i < arg_count; ++i) {
      KernelCall call = Kernels::get().make(kernel);
      Arg& arg = *call.args[i];
      if (!row.fits(arg)) continue;
      ++applied;
      SCOPED_TRACE(kernel + ", " + arg.name);
      row.mutate(call, arg);
      const std::vector<std::vector<float>> before = call.buffers();
      const std::string message = call.run(call);

      if (row.legal && row.legal(kernel, arg)) {
        EXPECT_EQ(message, "") << "documented as legal";
        if (row.name == std::string("written exactly over its input")) {
          KernelCall reference = Kernels::get().make(kernel);
          ASSERT_EQ(reference.run(reference), "");
          const std::vector<float>& want = reference.arg("output").storage;
          const std::vector<float>& got = call.arg("input").storage;  // written in place
          for (size_t j = 0; j < 3 * 16; ++j) EXPECT_EQ(got[j], want[j]) << "element " << j;
        } else {
          const Arg& out = *call.args.back();
          EXPECT_NE(out.storage, before.back()) << out.name << " was not written";
        }
      } else {
        EXPECT_NE(message, "") << "accepted";
        EXPECT_NE(message.find(arg.name), std::string::npos)
            << "the message does not name " << arg.name << ": " << message;
        EXPECT_NE(message.find(row.error), std::string::npos)
            << "expected \"" << row.error << "\" in: " << message;
        EXPECT_TRUE(call.buffers() == before) << "a buffer changed on refusal";
        if (print_messages()) {
          std::cout << row.name << " | " << kernel << " | " << arg.name << " | " << message << "\n";
        }
      }
      KernelCall good = Kernels::get().make(kernel);
      EXPECT_EQ(good.run(good), "") << "a good call after the hostile one";
    }
  }
  EXPECT_GT(applied, 0);
}

std::string row_name(const ::testing::TestParamInfo<Hostile>& param) {
  std::string out;
  for (const char ch : std::string(param.param.name)) {
    out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Table, HostileKernelInputs, ::testing::ValuesIn(table()), row_name);

}  // namespace
}  // namespace backplane::hostile
