// A library shaped like a kernel-builder extension (a Python module init that calls
// PyModule_Create2, linked -z now) that registers no op: TorchExtension::load must refuse it.
extern "C" void* PyModule_Create2(void* definition, int api_version);

extern "C" __attribute__((visibility("default"))) void* PyInit__noops_cpu_0000000() {
  static char definition[128];
  return PyModule_Create2(definition, 1013);
}
