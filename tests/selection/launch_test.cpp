// detect_launch: ranks from torchrun, MPI (PMI, Open MPI, MVAPICH2) and Slurm in Accelerate's
// order (accelerate utils/environment.py get_cpu_distributed_information, get_int_from_env).
#include <backplane/error.hpp>
#include <backplane/rules/selection.hpp>

#include <gtest/gtest.h>

#include "expect_error.hpp"
#include "machine.hpp"

namespace {

using backplane::detect_launch;
using backplane::InvalidArgument;
using selection_test::env;
using selection_test::error_of;

struct Row {
  const char* name;
  std::map<std::string, std::string> vars;
  const char* launcher;
  int rank, local_rank, world_size;
  bool mpi;
};

void PrintTo(const Row& row, std::ostream* os) {
  *os << row.name;
}

class Launch : public ::testing::TestWithParam<Row> {};

TEST_P(Launch, ReadsTheLaunchersVariables) {
  const Row& row = GetParam();
  const backplane::Launch launch = detect_launch(env(row.vars));
  EXPECT_EQ(launch.launcher, row.launcher);
  EXPECT_EQ(launch.launched(), std::string(row.launcher) != "");
  EXPECT_EQ(launch.rank, row.rank);
  EXPECT_EQ(launch.local_rank, row.local_rank);
  EXPECT_EQ(launch.world_size, row.world_size);
  EXPECT_EQ(launch.mpi, row.mpi);
}

INSTANTIATE_TEST_SUITE_P(
    Table, Launch,
    ::testing::Values(Row{"nothing", {}, "", 0, 0, 1, false},
                      Row{"torchrun",
                          {{"LOCAL_RANK", "2"}, {"RANK", "6"}, {"WORLD_SIZE", "8"}},
                          "torchrun",
                          6,
                          2,
                          8,
                          false},
                      // Accelerate: LOCAL_RANK alone marks a launch, even with one process.
                      Row{"torchrun_single", {{"LOCAL_RANK", "0"}}, "torchrun", 0, 0, 1, false},
                      // LOCAL_RANK=-1 is Accelerate's "not launched".
                      Row{"local_rank_minus_one", {{"LOCAL_RANK", "-1"}}, "", 0, 0, 1, false},
                      Row{"open_mpi",
                          {{"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                           {"OMPI_COMM_WORLD_RANK", "5"},
                           {"OMPI_COMM_WORLD_SIZE", "8"}},
                          "mpi",
                          5,
                          1,
                          8,
                          true},
                      Row{"mpich_pmi",
                          {{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "3"}},
                          "mpi",
                          3,
                          3,
                          4,
                          true},
                      Row{"mvapich2",
                          {{"MV2_COMM_WORLD_RANK", "1"},
                           {"MV2_COMM_WORLD_SIZE", "2"},
                           {"MV2_COMM_WORLD_LOCAL_RANK", "1"}},
                          "mpi",
                          1,
                          1,
                          2,
                          true},
                      Row{"slurm",
                          {{"SLURM_LOCALID", "1"}, {"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}},
                          "slurm",
                          3,
                          1,
                          4,
                          false},
                      // A single-process MPI or Slurm job is not a launch.
                      Row{"mpi_world_1",
                          {{"OMPI_COMM_WORLD_SIZE", "1"}, {"OMPI_COMM_WORLD_RANK", "0"}},
                          "",
                          0,
                          0,
                          1,
                          true},
                      // Precedence: torchrun's names first, then PMI, Open MPI, MVAPICH2, Slurm.
                      Row{"torchrun_over_mpi",
                          {{"RANK", "1"},
                           {"WORLD_SIZE", "2"},
                           {"OMPI_COMM_WORLD_RANK", "5"},
                           {"OMPI_COMM_WORLD_SIZE", "8"}},
                          "torchrun",
                          1,
                          0,
                          2,
                          false},
                      Row{"pmi_over_open_mpi",
                          {{"PMI_RANK", "2"},
                           {"PMI_SIZE", "4"},
                           {"OMPI_COMM_WORLD_RANK", "1"},
                           {"OMPI_COMM_WORLD_SIZE", "8"}},
                          "mpi",
                          2,
                          0,
                          4,
                          true},
                      Row{"mpi_over_slurm",
                          {{"OMPI_COMM_WORLD_RANK", "1"},
                           {"OMPI_COMM_WORLD_SIZE", "2"},
                           {"SLURM_PROCID", "7"},
                           {"SLURM_NTASKS", "16"}},
                          "mpi",
                          1,
                          0,
                          2,
                          true},
                      // get_int_from_env skips negative values and reads the next variable.
                      Row{"negative_skipped",
                          {{"RANK", "-1"}, {"PMI_RANK", "1"}, {"PMI_SIZE", "2"}},
                          "mpi",
                          1,
                          0,
                          2,
                          true},
                      // Python's int(): whitespace, a sign and single underscores are fine.
                      Row{"python_int",
                          {{"LOCAL_RANK", " 1 "}, {"RANK", "+1_0"}, {"WORLD_SIZE", "1_6"}},
                          "torchrun",
                          10,
                          1,
                          16,
                          false}),
    [](const ::testing::TestParamInfo<Row>& row) { return std::string(row.param.name); });

struct Bad {
  std::map<std::string, std::string> vars;
  const char* message;
};

void PrintTo(const Bad& row, std::ostream* os) {
  for (const auto& [name, value] : row.vars) *os << name << "='" << value << "' ";
}

class LaunchError : public ::testing::TestWithParam<Bad> {};

TEST_P(LaunchError, NamesTheVariable) {
  EXPECT_EQ(error_of<InvalidArgument>([] { detect_launch(env(GetParam().vars)); }),
            GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Table, LaunchError,
    ::testing::Values(
        Bad{{{"LOCAL_RANK", "abc"}},
            "Environment variable LOCAL_RANK='abc' is not an integer (Python's int() would fail: "
            "invalid literal for int() with base 10: 'abc')"},
        Bad{{{"RANK", "1.5"}},
            "Environment variable RANK='1.5' is not an integer (Python's int() would fail: "
            "invalid literal for int() with base 10: '1.5')"},
        Bad{{{"WORLD_SIZE", ""}},
            "Environment variable WORLD_SIZE='' is not an integer (Python's int() would fail: "
            "invalid literal for int() with base 10: '')"},
        Bad{{{"OMPI_COMM_WORLD_SIZE", "4x"}},
            "Environment variable OMPI_COMM_WORLD_SIZE='4x' is not an integer (Python's int() "
            "would fail: invalid literal for int() with base 10: '4x')"},
        Bad{{{"SLURM_LOCALID", "1__0"}},
            "Environment variable SLURM_LOCALID='1__0' is not an integer (Python's int() would "
            "fail: invalid literal for int() with base 10: '1__0')"},
        // int() stops at the first malformed variable even when a later one is fine.
        Bad{{{"RANK", "x"}, {"PMI_RANK", "1"}},
            "Environment variable RANK='x' is not an integer (Python's int() would fail: invalid "
            "literal for int() with base 10: 'x')"},
        Bad{{{"LOCAL_RANK", "0"}, {"RANK", "4"}, {"WORLD_SIZE", "4"}},
            "RANK=4 is not below WORLD_SIZE=4: ranks count from 0 to the number of processes - 1"},
        Bad{{{"LOCAL_RANK", "5"}, {"RANK", "1"}, {"WORLD_SIZE", "4"}},
            "LOCAL_RANK=5 is not below WORLD_SIZE=4: a local rank counts the processes on one "
            "machine"}));

TEST(Launch, SourcesNameTheVariablesUsed) {
  const auto launch = detect_launch(
      env({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"PMI_RANK", "1"}, {"SLURM_NTASKS", "2"}}));
  EXPECT_EQ(launch.launcher, "slurm");
  EXPECT_EQ(launch.sources, (std::vector<std::string>{"OMPI_COMM_WORLD_LOCAL_RANK=1", "PMI_RANK=1",
                                                      "SLURM_NTASKS=2"}));
  EXPECT_TRUE(launch.mpi);
}

}  // namespace
