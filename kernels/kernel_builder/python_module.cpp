// The Python side of a kernel-builder extension: `from . import <id>` in _ops.py imports the
// library as an (empty) extension module, which is what loads it and runs its TORCH_LIBRARY
// registrations. Stable ABI (abi3, Py_LIMITED_API); libpython is not linked: PyModule_Create2
// is resolved from the importing interpreter. BACKPLANE_OPS_ID, set by the build, names the
// module; PyInit_<id> is the one symbol the library exports.
#include <Python.h>

#define BACKPLANE_STR_(x) #x
#define BACKPLANE_STR(x) BACKPLANE_STR_(x)
#define BACKPLANE_CAT_(a, b) a##b
#define BACKPLANE_CAT(a, b) BACKPLANE_CAT_(a, b)

namespace {

PyModuleDef backplane_module = {
    PyModuleDef_HEAD_INIT,
    BACKPLANE_STR(BACKPLANE_OPS_ID),  // m_name
    "backplane layer kernels; the ops are torch.ops." BACKPLANE_STR(BACKPLANE_OPS_ID),
    -1,       // m_size: no per-module state
    nullptr,  // m_methods: none, the ops are LibTorch's
    nullptr,  // m_slots
    nullptr,  // m_traverse
    nullptr,  // m_clear
    nullptr,  // m_free
};

}  // namespace

// PyMODINIT_FUNC: extern "C", default visibility. PyModule_Create is PyModule_Create2 with the
// stable ABI's version under Py_LIMITED_API.
PyMODINIT_FUNC BACKPLANE_CAT(PyInit_, BACKPLANE_OPS_ID)() {
  return PyModule_Create(&backplane_module);
}
