// Every in-tree plugin joins the conformance suite, one line each.
#include <backplane/conformance.hpp>

#include <stdlib.h>

#ifdef BACKPLANE_HAVE_CPU_PLUGIN
BACKPLANE_CONFORMANCE_SUITE(cpu, BACKPLANE_PLUGIN_BUILD_DIR "/cpu.json");
#endif
#ifdef BACKPLANE_HAVE_MPS_PLUGIN
BACKPLANE_CONFORMANCE_SUITE(mps, BACKPLANE_PLUGIN_BUILD_DIR "/mps.json");
#endif
#ifdef BACKPLANE_HAVE_CUDA_PLUGIN
BACKPLANE_CONFORMANCE_SUITE(cuda, BACKPLANE_PLUGIN_BUILD_DIR "/cuda.json");
#endif
#ifdef BACKPLANE_HAVE_ROCM_PLUGIN
BACKPLANE_CONFORMANCE_SUITE(rocm, BACKPLANE_PLUGIN_BUILD_DIR "/rocm.json");
#endif
#ifdef BACKPLANE_HAVE_XPU_PLUGIN
BACKPLANE_CONFORMANCE_SUITE(xpu, BACKPLANE_PLUGIN_BUILD_DIR "/xpu.json");
#endif
#ifdef BACKPLANE_HAVE_SIM_PLUGIN
// Simulating the mixed topology for this whole program: the other plugins ignore the variable.
static const bool sim_topology_set =
    ::setenv("BACKPLANE_SIM_TOPOLOGY", BACKPLANE_SIM_TOPOLOGY_FILE, 1) == 0;
BACKPLANE_CONFORMANCE_SUITE(sim, BACKPLANE_PLUGIN_BUILD_DIR "/sim.json");
#endif
// Fake plugins that must pass (tests/fake_plugins): a plugin with devices, properties and
// memory_info, and one built against the frozen ABI 1.0 header.
BACKPLANE_CONFORMANCE_SUITE(fake_good, BACKPLANE_FAKE_GOOD_MANIFEST);
BACKPLANE_CONFORMANCE_SUITE(fake_abi_1_0, BACKPLANE_FAKE_ABI_1_0_MANIFEST);
