// The conformance suite run on one faulty plugin; ctest expects the failure it must report.
#include <backplane/conformance.hpp>

BACKPLANE_CONFORMANCE_SUITE(faulty, FAULTY_MANIFEST);
