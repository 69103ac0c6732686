// A real distributed run over loopback: `distributed_run --launch 4` starts four copies of itself
// the way torchrun does (MASTER_ADDR, MASTER_PORT, RANK, LOCAL_RANK, WORLD_SIZE). Each worker
// selects its device and collective backend through backplane, then all-reduces a tensor over
// LibTorch's c10d ProcessGroupGloo (rendezvous through c10d's TCPStore) and checks that every
// rank contributed its rank and that all agree on the world size. The collective always runs on
// gloo, whatever backend the selection names (a simulated topology has no real GPUs).
//
// The parent checks each worker's selection against --expect-device (with {local_rank}
// substituted) and --expect-backend, kills every worker on the first failure or after
// --timeout seconds, and exits 0 only when all four succeeded.
//
//   distributed_run --launch N [--timeout S] [--expect-device D] [--expect-backend B]
#include <backplane/backplane.hpp>
#include <backplane/rules/selection.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr auto kCollectiveTimeout = std::chrono::seconds(30);

int env_int(const char* name) {
  const char* value = std::getenv(name);
  if (!value) throw std::runtime_error(std::string(name) + " is not set");
  return std::stoi(value);
}

// ---- worker -----------------------------------------------------------------------------------

int run_worker() {
  const backplane::Runtime runtime = backplane::Runtime::open();
  const backplane::Selection selection = backplane::select_training_device(runtime);
  const int rank = env_int("RANK");
  const int world = env_int("WORLD_SIZE");
  if (selection.rank != rank || selection.world_size != world) {
    std::cerr << "rank " << rank << ": selection says rank " << selection.rank << " of "
              << selection.world_size << ", the launcher " << rank << " of " << world << "\n";
    return 1;
  }

  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(env_int("MASTER_PORT"));
  store_options.isServer = rank == 0;
  store_options.numWorkers = static_cast<std::size_t>(world);
  store_options.timeout = kCollectiveTimeout;
  auto store = c10::make_intrusive<c10d::TCPStore>(std::getenv("MASTER_ADDR"), store_options);

  auto options = c10d::ProcessGroupGloo::Options::create(kCollectiveTimeout);
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);

  // Each rank contributes [its rank, the world size it selected, 1].
  std::vector<at::Tensor> tensors = {at::tensor(
      {static_cast<double>(selection.rank), static_cast<double>(selection.world_size), 1.0},
      at::kDouble)};
  group->allreduce(tensors)->wait();
  const at::Tensor sum = tensors[0];
  const double rank_sum = sum[0].item<double>();
  const double world_sum = sum[1].item<double>();
  const double processes = sum[2].item<double>();

  std::cout << "rank=" << selection.rank << " local_rank=" << selection.local_rank
            << " world_size=" << selection.world_size << " device=" << selection.device
            << " collective_backend=" << selection.collective_backend.value_or("none")
            << " allreduce_rank_sum=" << rank_sum << " processes=" << processes << std::endl;

  const double expected_rank_sum = world * (world - 1) / 2.0;
  if (rank_sum != expected_rank_sum || processes != world ||
      world_sum != static_cast<double>(world) * world) {
    std::cerr << "rank " << rank << ": all-reduce gave rank sum " << rank_sum << " (expected "
              << expected_rank_sum << "), " << processes << " processes, world sizes summing to "
              << world_sum << "\n";
    return 1;
  }
  return 0;
}

// ---- parent -----------------------------------------------------------------------------------

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("no free loopback port");
  }
  const int port = ntohs(address.sin_port);
  ::close(fd);
  return port;
}

struct Child {
  pid_t pid = -1;
  int out = -1;  // read end of its stdout
  std::string output;
  int status = -1;
  bool done = false;
};

Child spawn(int rank, int world, int port) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    // torchrun's variables; no other launcher's.
    for (const char* name :
         {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK",
          "PMI_SIZE", "MPI_LOCALRANKID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"}) {
      ::unsetenv(name);
    }
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    ::setenv("RANK", std::to_string(rank).c_str(), 1);
    ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
    ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
    ::setenv("LOCAL_WORLD_SIZE", std::to_string(world).c_str(), 1);
    ::execl("/proc/self/exe", "distributed_run", "--worker", static_cast<char*>(nullptr));
    std::perror("exec");
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  Child child;
  child.pid = pid;
  child.out = pipe_fds[0];
  return child;
}

void drain(Child& child) {
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(child.out, buffer, sizeof(buffer))) > 0) {
    child.output.append(buffer, static_cast<size_t>(n));
  }
  ::close(child.out);
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

int run_parent(int world, int timeout_s, const std::string& expect_device,
               const std::string& expect_backend) {
  const int port = free_port();
  std::cout << "launching " << world << " workers, MASTER_ADDR=127.0.0.1 MASTER_PORT=" << port
            << ", timeout " << timeout_s << " s" << std::endl;
  std::vector<Child> children;
  for (int rank = 0; rank < world; ++rank) children.push_back(spawn(rank, world, port));

  auto kill_all = [&](const std::string& why) {
    std::cerr << "distributed_run: " << why << "; killing every worker\n";
    for (Child& child : children) {
      if (!child.done) ::kill(child.pid, SIGKILL);
    }
    for (Child& child : children) {
      if (!child.done) ::waitpid(child.pid, nullptr, 0);
      child.done = true;
    }
    return 1;
  };

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  size_t finished = 0;
  while (finished < children.size()) {
    for (size_t rank = 0; rank < children.size(); ++rank) {
      Child& child = children[rank];
      if (child.done || ::waitpid(child.pid, &child.status, WNOHANG) != child.pid) continue;
      child.done = true;
      ++finished;
      if (!WIFEXITED(child.status) || WEXITSTATUS(child.status) != 0) {
        return kill_all("worker " + std::to_string(rank) + " failed");
      }
    }
    if (std::chrono::steady_clock::now() > deadline) return kill_all("timed out");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  int status = 0;
  for (size_t rank = 0; rank < children.size(); ++rank) {
    Child& child = children[rank];
    drain(child);
    std::cout << child.output;
    const std::string local = std::to_string(rank);
    const std::string device = replace_all(expect_device, "{local_rank}", local);
    if (!expect_device.empty() &&
        child.output.find(" device=" + device + " ") == std::string::npos) {
      std::cerr << "worker " << rank << ": expected device " << device << "\n";
      status = 1;
    }
    if (!expect_backend.empty() &&
        child.output.find(" collective_backend=" + expect_backend + " ") == std::string::npos) {
      std::cerr << "worker " << rank << ": expected collective backend " << expect_backend << "\n";
      status = 1;
    }
  }
  std::cout << (status == 0 ? "all ranks agree" : "selection differs from the expectation")
            << std::endl;
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> options;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--worker") {
      options[word] = "";
    } else if (i + 1 < argc) {
      options[word] = argv[++i];
    }
  }
  try {
    if (options.count("--worker")) return run_worker();
    if (!options.count("--launch")) {
      std::cerr << "usage: distributed_run --launch N [--timeout S] [--expect-device D] "
                   "[--expect-backend B]\n";
      return 2;
    }
    return run_parent(std::stoi(options["--launch"]),
                      options.count("--timeout") ? std::stoi(options["--timeout"]) : 60,
                      options["--expect-device"], options["--expect-backend"]);
  } catch (const std::exception& e) {
    std::cerr << "distributed_run: " << e.what() << "\n";
    return 1;
  }
}
