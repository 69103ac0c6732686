// estimate_memory and its table on hand-built trees: accelerate's byte formatting (convert_bytes),
// its largest-layer walk, the training parts, and the fits on hand-made hardware.
#include <backplane/error.hpp>
#include <backplane/model/memory_estimate.hpp>

#include <gtest/gtest.h>

namespace backplane {
namespace {

TEST(MemoryEstimate, BytesPrintAsAccelerateConvertBytesPrintsThem) {
  struct Case {
    double bytes;
    bool integral;
    const char* text;
  } cases[] = {
      {512, true, "512 bytes"},
      {256, false, "256.0 bytes"},
      {1536, true, "1.5 KB"},
      {1e9, true, "953.67 MB"},
      {1023.999, false, "1024.0 bytes"},  // the < 1024 test comes before the rounding
      {1024, true, "1.0 KB"},
      {26424868864.0, true, "24.61 GB"},
      {3.5 * 1125899906842624.0, true, "3.5 PB"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(format_estimate_bytes(c.bytes, c.integral), c.text) << c.bytes;
  }
}

TensorInfo param(const char* name, std::vector<int64_t> shape, DType dtype = DType::kBFloat16) {
  TensorInfo t;
  t.name = name;
  t.shape = std::move(shape);
  t.dtype = dtype;
  return t;
}

// A root with an embedding (10x4), two no-split blocks (a Linear 4x4 and a norm each), and a
// flag buffer of 16 bools (2 bytes as accelerate counts bool).
ModelDescription tiny_model() {
  ModelDescription m;
  m.architecture = "TinyForCausalLM";
  m.from_config = false;  // no AutoModel entry: the whole tree is sized
  m.no_split_module_classes = {"Block"};
  Module embed{"embed", "Embedding", {param("weight", {10, 4})}, {}};
  auto block = [](const char* name) {
    Module linear{"proj", "Linear", {param("weight", {4, 4})}, {}};
    Module norm{"norm", "RMSNorm", {param("weight", {4})}, {}};
    return Module{name, "Block", {}, {linear, norm}};
  };
  Module layers{"layers", "ModuleList", {}, {block("0"), block("1")}};
  TensorInfo flags = param("flags", {16}, DType::kBool);
  flags.buffer = true;
  m.root = Module{"", "Tiny", {flags}, {embed, layers}};
  return m;
}

TEST(MemoryEstimate, SizesTheFloat32ModelAndItsLargestLayer) {
  PlanHardware hw;
  hw.cpu_available = 1000;
  const MemoryEstimate e =
      estimate_memory(tiny_model(), {EstimateDType::kFloat32, EstimateDType::kInt4}, hw);
  // 40 + 2 * (16 + 4) parameters at 4 bytes (bf16 weights count as float32), 16 bools at 1/8.
  EXPECT_EQ(e.parameters, 80u);
  EXPECT_DOUBLE_EQ(e.total_bytes, 80 * 4 + 2);
  EXPECT_DOUBLE_EQ(e.largest_layer_bytes, 160);  // the embedding, before either block (80)
  EXPECT_EQ(e.largest_layer, "embed");
  EXPECT_FALSE(e.base_model_known);
  ASSERT_EQ(e.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(*e.rows[0].training_adam, 4 * 322);
  EXPECT_DOUBLE_EQ(e.rows[0].training->total(), 4 * 322);
  EXPECT_EQ(e.rows[0].training_fit, Fit::kNone);  // 1288 bytes > 1000 of RAM
  EXPECT_EQ(e.rows[0].inference_fit, Fit::kWhole);
  EXPECT_DOUBLE_EQ(e.rows[1].total, 322.0 / 8);
  EXPECT_FALSE(e.rows[1].training_adam.has_value());
}

TEST(MemoryEstimate, FitsCompareWithTheDevicesFreeMemory) {
  ModelDescription m = tiny_model();  // 322 bytes in float32, 161 in float16
  PlanHardware hw;
  hw.accelerator_type = "cuda";
  hw.accelerators = {{0, 200, std::nullopt}, {1, 150, std::nullopt}};
  hw.cpu_available = 100;
  const MemoryEstimate e =
      estimate_memory(m, {EstimateDType::kFloat32, EstimateDType::kFloat16}, hw);
  EXPECT_EQ(e.rows[0].inference_fit, Fit::kSplit);  // 322 <= 350
  EXPECT_EQ(e.rows[1].inference_fit, Fit::kWhole);  // 161 <= 200
  EXPECT_EQ(e.rows[1].training_fit, Fit::kNone);    // 4.5 x 322 > 350 + 100
  hw.cpu_available = 2000;
  EXPECT_EQ(estimate_memory(m, {EstimateDType::kFloat32}, hw).rows[0].training_fit,
            Fit::kCpuOffload);  // 1288 <= 350 + 2000
}

TEST(MemoryEstimate, RefusesADtypeAccelerateDoesNotTake) {
  EXPECT_EQ(parse_estimate_dtype("int4"), EstimateDType::kInt4);
  try {
    parse_estimate_dtype("bfloat16");
    FAIL() << "bfloat16 was taken";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'bfloat16'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'int8'"), std::string::npos) << e.what();
  }
}

TEST(MemoryEstimate, TheTableIsAcceleratesLayout) {
  PlanHardware hw;
  const MemoryEstimate e = estimate_memory(tiny_model(), {EstimateDType::kFloat32}, hw);
  const std::string table = estimate_table(e, "m");
  // As accelerate 1.15's create_ascii_table draws it (the title shorter than the columns: no
  // widening); float32 sizes stay Python ints.
  EXPECT_EQ(table,
            "┌────────────────────────────────────────────────────┐\n"
            "│            Memory Usage for loading `m`            │\n"
            "├───────┬─────────────┬──────────┬───────────────────┤\n"
            "│ dtype │Largest Layer│Total Size│Training using Adam│\n"
            "├───────┼─────────────┼──────────┼───────────────────┤\n"
            "│float32│  160 bytes  │322 bytes │      1.26 KB      │\n"
            "└───────┴─────────────┴──────────┴───────────────────┘");
}

}  // namespace
}  // namespace backplane
