/*
 * A fake backplane plugin in C99, compiled once per variant with different definitions (as
 * Vulkan-Loader builds tests/framework/icd/test_icd.cpp several times). The good variants
 * register two fake devices; every other variant misbehaves in exactly one way, on purpose, so
 * that tests/loader can check the core refuses it with the right reason while the plugins
 * beside it still load. See CMakeLists.txt for the list of variants.
 *
 *   FAKE_NAME "..."               the plugin's name (required); FAKE_TABLE_NAME overrides the
 *                                 name the table reports
 *   FAKE_TYPE "..."               the device type it registers (default "fakeaccel")
 *   FAKE_VERSION "..."            the version it reports
 *   FAKE_TRAINING_PRIORITY n, FAKE_COLLECTIVE "..."
 *   FAKE_NO_ENTRY                 the entry symbol is compiled but not exported
 *   FAKE_ENTRY_RETURNS_NULL       the entry symbol returns NULL
 *   FAKE_TABLE_ABI_MAJOR n        the table claims ABI major n
 *   FAKE_TABLE_TOO_SMALL          the table's struct_size is below ABI 1.0's
 *   FAKE_INIT_FAILS               init registers its type and device 0, then fails
 *   FAKE_IGNORE_ERROR             init registers an invalid device, drops the refusal, succeeds
 *   FAKE_UNAVAILABLE              the type is unavailable, with a reason (and no devices)
 *   FAKE_UNAVAILABLE_NO_REASON    the type is unavailable and no reason is given
 *   FAKE_DEVICES_OUT_OF_ORDER     device 1 is registered before device 0
 *   FAKE_MEMORY_INFO_FAILS        memory_info returns an error
 *   FAKE_NEWER_MINOR              built for ABI 1.(host minor + 1): the table and descriptors
 *                                 are larger than the host's, with extra trailing fields
 *   FAKE_INIT_SEGFAULT            init dies of SIGSEGV (tests/isolation)
 *   FAKE_INIT_HANG                init never returns
 *   FAKE_INIT_EXIT n              init calls exit(n)
 *
 * Built against tests/abi/v1_0 (BP_ABI_VERSION_MINOR 0) it has no memory_info (1.1) and no
 * visibility_variable (1.2) at all.
 *
 * The plugin logs "init" and "shutdown" through the host so tests can pair them.
 */
#include <backplane/plugin.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef FAKE_NAME
#error "FAKE_NAME must be defined"
#endif
#ifndef FAKE_TABLE_NAME
#define FAKE_TABLE_NAME FAKE_NAME
#endif
#ifndef FAKE_TYPE
#define FAKE_TYPE "fakeaccel"
#endif
#ifndef FAKE_VERSION
#define FAKE_VERSION "9.8.7-fake"
#endif
#ifndef FAKE_TRAINING_PRIORITY
#define FAKE_TRAINING_PRIORITY 0
#endif
#ifndef FAKE_COLLECTIVE
#define FAKE_COLLECTIVE NULL
#endif
#ifndef FAKE_TABLE_ABI_MAJOR
#define FAKE_TABLE_ABI_MAJOR BP_ABI_VERSION_MAJOR
#endif

#define FAKE_DEVICE_COUNT 2
#define FAKE_GIB ((uint64_t)1 << 30)

/* The table and descriptors as this plugin writes them. With FAKE_NEWER_MINOR they carry what
 * a future minor version might append; the host must ignore it. */
#ifdef FAKE_NEWER_MINOR
#define FAKE_ABI_MINOR (BP_ABI_VERSION_MINOR + 1)
static void fake_future_function(void) {
  abort(); /* a host that calls this is broken */
}
#else
#define FAKE_ABI_MINOR BP_ABI_VERSION_MINOR
#endif

typedef struct fake_plugin_api {
  bp_plugin_api api;
#ifdef FAKE_NEWER_MINOR
  void (*future_function)(void);
  uint64_t future_flags;
#endif
} fake_plugin_api;

typedef struct fake_device_type_desc {
  bp_device_type_desc desc;
#ifdef FAKE_NEWER_MINOR
  const char* future_name;
  uint64_t future_flags;
#endif
} fake_device_type_desc;

typedef struct fake_device_desc {
  bp_device_desc desc;
#ifdef FAKE_NEWER_MINOR
  const char* future_name;
  double future_value;
#endif
} fake_device_desc;

struct bp_plugin_state {
  const bp_host_api* host;
};

static uint64_t fake_memory_total(int32_t index) {
  return (16 * FAKE_GIB) >> index;
}

static bp_status* fake_add_type(const bp_registrar* registrar) {
  fake_device_type_desc t;
  memset(&t, 0, sizeof t);
  t.desc.struct_size = sizeof t;
  t.desc.name = FAKE_TYPE;
  t.desc.collective_backend = FAKE_COLLECTIVE;
  t.desc.training_priority = FAKE_TRAINING_PRIORITY;
  t.desc.flags = BP_TYPE_ACCELERATOR | BP_TYPE_AUTO_PLACEMENT;
#if defined(FAKE_UNAVAILABLE)
  t.desc.available = 0;
  t.desc.unavailable_reason = "the fake driver is not installed (install fakedrv 1.2)";
#elif defined(FAKE_UNAVAILABLE_NO_REASON)
  t.desc.available = 0;
  t.desc.unavailable_reason = NULL;
#else
  t.desc.available = 1;
#endif
#ifdef FAKE_NEWER_MINOR
  t.future_name = "ignored by this host";
  t.future_flags = ~(uint64_t)0;
#endif
  return registrar->add_device_type(registrar->context, &t.desc);
}

/* One device with a property of every bp_value_kind. Unused by the unavailable variants. */
__attribute__((unused)) static bp_status* fake_add_device(const bp_registrar* registrar,
                                                          int32_t index, const char* name) {
  static const char* const links[] = {"fakelink0", "fakelink1"};
  bp_property properties[6];
  fake_device_desc d;

  memset(properties, 0, sizeof properties);
  properties[0].name = "driver";
  properties[0].kind = BP_VALUE_STRING;
  properties[0].value.string = "fakedrv 1.2";
  properties[1].name = "cores";
  properties[1].kind = BP_VALUE_INT64;
  properties[1].value.int64 = 128 * (int64_t)(index + 1);
  properties[2].name = "clock_ghz";
  properties[2].kind = BP_VALUE_FLOAT64;
  properties[2].value.float64 = 1.5;
  properties[3].name = "ecc";
  properties[3].kind = BP_VALUE_BOOL;
  properties[3].value.boolean = index == 0;
  properties[4].name = "links";
  properties[4].kind = BP_VALUE_STRING_LIST;
  properties[4].value.string_list.items = links;
  properties[4].value.string_list.count = 2;
  properties[5].name = "peers";
  properties[5].kind = BP_VALUE_STRING_LIST; /* empty: items may be NULL */
  properties[5].value.string_list.items = NULL;
  properties[5].value.string_list.count = 0;

  memset(&d, 0, sizeof d);
  d.desc.struct_size = sizeof d;
  d.desc.type = FAKE_TYPE;
  d.desc.index = index;
  d.desc.physical_index = index + 4;
  d.desc.name = name;
  d.desc.vendor = "Fakes Inc";
  d.desc.uuid = index == 0 ? "fake-uuid-0" : "fake-uuid-1";
  d.desc.pci_bus_id = index == 0 ? "0000:f0:00.0" : "0000:f1:00.0";
  d.desc.arch = "fake_v1";
  d.desc.compute_capability_major = 9;
  d.desc.compute_capability_minor = index;
  d.desc.memory_total = fake_memory_total(index);
  d.desc.capabilities = BP_CAP_FP16 | BP_CAP_BF16;
  d.desc.simulated = 1;
  d.desc.properties = properties;
  d.desc.property_count = sizeof properties / sizeof properties[0];
#if BP_ABI_VERSION_MINOR >= 2
  d.desc.visibility_variable = "FAKE_VISIBLE_DEVICES";
#endif
#ifdef FAKE_NEWER_MINOR
  d.future_name = "ignored by this host";
  d.future_value = -1.0;
#endif
  return registrar->add_device(registrar->context, &d.desc);
}

static bp_status* fake_register(const bp_host_api* host, const bp_registrar* registrar) {
  bp_status* status = fake_add_type(registrar);
  if (status != NULL) return status;
#if defined(FAKE_INIT_FAILS)
  status = fake_add_device(registrar, 0, "Fake Accelerator 0");
  if (status != NULL) return status;
  return host->status_new(host->context, BP_UNAVAILABLE,
                          "fake init failure: the fake driver is not loaded");
#elif defined(FAKE_UNAVAILABLE) || defined(FAKE_UNAVAILABLE_NO_REASON)
  (void)host;
  return NULL; /* an unavailable backend has no devices */
#elif defined(FAKE_IGNORE_ERROR)
  status = fake_add_device(registrar, 0, "Fake Accelerator 0");
  if (status != NULL) return status;
  /* Refused (empty name). The plugin skips the device, frees the status (ABI 1.2) and carries
   * on with a valid device 1: the host must still fail the plugin. */
  status = fake_add_device(registrar, 1, "");
  if (host->struct_size >= BP_STRUCT_SIZE(bp_host_api, status_free)) {
    host->status_free(host->context, status);
  }
  return fake_add_device(registrar, 1, "Fake Accelerator 1");
#elif defined(FAKE_DEVICES_OUT_OF_ORDER)
  (void)host;
  status = fake_add_device(registrar, 1, "Fake Accelerator 1");
  if (status != NULL) return status;
  return fake_add_device(registrar, 0, "Fake Accelerator 0");
#else
  (void)host;
  status = fake_add_device(registrar, 0, "Fake Accelerator 0");
  if (status != NULL) return status;
  return fake_add_device(registrar, 1, "Fake Accelerator 1");
#endif
}

static bp_status* fake_init(const bp_host_api* host, const bp_registrar* registrar,
                            bp_plugin_state** out) {
  bp_plugin_state* state;
  bp_status* status;
  host->log(host->context, BP_LOG_INFO, "init");
#if defined(FAKE_INIT_SEGFAULT)
  /* The default action, even in a sanitizer build whose handler would report the fault and exit
   * with a status instead: the test is about the signal. */
  signal(SIGSEGV, SIG_DFL);
  raise(SIGSEGV);
#elif defined(FAKE_INIT_HANG)
  for (;;) pause();
#elif defined(FAKE_INIT_EXIT)
  exit(FAKE_INIT_EXIT);
#endif
  status = fake_register(host, registrar);
  if (status != NULL) return status;
  state = (bp_plugin_state*)malloc(sizeof *state);
  if (state == NULL) return host->status_new(host->context, BP_OUT_OF_MEMORY, "no memory");
  state->host = host;
  *out = state;
  return NULL;
}

static void fake_shutdown(bp_plugin_state* state) {
  state->host->log(state->host->context, BP_LOG_INFO, "shutdown");
  free(state);
}

#if BP_ABI_VERSION_MINOR >= 1
static bp_status* fake_memory_info(bp_plugin_state* state, const char* type, int32_t index,
                                   uint64_t* free_bytes, uint64_t* total_bytes) {
  const bp_host_api* host = state->host;
  if (strcmp(type, FAKE_TYPE) != 0 || index < 0 || index >= FAKE_DEVICE_COUNT) {
    return host->status_new(host->context, BP_NOT_FOUND, "no such fake device");
  }
#ifdef FAKE_MEMORY_INFO_FAILS
  (void)free_bytes;
  (void)total_bytes;
  return host->status_new(host->context, BP_UNAVAILABLE, "fake memory counters are offline");
#else
  *total_bytes = fake_memory_total(index);
  *free_bytes = *total_bytes - (uint64_t)(index + 1) * FAKE_GIB;
  return NULL;
#endif
}
#endif

static const fake_plugin_api fake_table = {
    {
#ifdef FAKE_TABLE_TOO_SMALL
        offsetof(bp_plugin_api, name), /* ends before name: no 1.x table is this small */
#else
        sizeof(fake_plugin_api),
#endif
        NULL,
        FAKE_TABLE_ABI_MAJOR,
        FAKE_ABI_MINOR,
        FAKE_TABLE_NAME,
        FAKE_VERSION,
        fake_init,
        fake_shutdown,
#if BP_ABI_VERSION_MINOR >= 1
        fake_memory_info,
#endif
    },
#ifdef FAKE_NEWER_MINOR
    fake_future_function,
    ~(uint64_t)0,
#endif
};

#ifdef FAKE_NO_ENTRY
/* Compiled but not exported (hidden visibility and the version script): the library has no
 * entry symbol at all. */
const bp_plugin_api* fake_hidden_get_api(void);
const bp_plugin_api* fake_hidden_get_api(void) {
  return &fake_table.api;
}
#else
BP_PLUGIN_EXPORT const bp_plugin_api* backplane_plugin_get_api(uint32_t host_abi_major,
                                                               uint32_t host_abi_minor) {
  (void)host_abi_minor;
#ifdef FAKE_ENTRY_RETURNS_NULL
  (void)host_abi_major;
  (void)&fake_table;
  return NULL;
#else
  if (host_abi_major != BP_ABI_VERSION_MAJOR) return NULL;
  return &fake_table.api;
#endif
}
#endif
