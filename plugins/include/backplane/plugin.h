/*
 * backplane plugin ABI: the whole contract between the backplane core (the host) and a backend
 * plugin. C99, no other header of this project needed. See plugins/README.md for the guide and
 * plugins/CHANGELOG.md for what each minor version added. Needs only <dlpack/dlpack.h> (DLPack,
 * for tensors) besides the C library.
 *
 * Versioning
 *   The major version breaks; minor versions only append. Every extensible struct starts with
 *   `struct_size` (set it to sizeof(the struct) as your header declares it) and `extension`
 *   (reserved, NULL). A reader accepts any struct at least as large as the ABI 1.0 layout:
 *   fields beyond the writer's struct_size read as zero/NULL, fields the reader does not know are
 *   ignored. So a plugin built against an older or newer 1.x header loads in any 1.y host.
 *
 * Ownership and lifetime
 *   - Strings and arrays a plugin passes to the host are borrowed for the duration of the call;
 *     the host copies what it keeps.
 *   - `bp_status` objects are made only by the host (bp_host_api.status_new). A status a plugin
 *     returns passes to the host, which frees it. NULL means success.
 *   - The plugin table returned by the entry symbol, and `name`/`version` in it, have static
 *     storage duration in the plugin.
 *   - The bp_host_api passed to init stays valid until shutdown returns; the registrar is valid
 *     only during init.
 *
 * Threading
 *   init and shutdown are called from one thread. memory_info and kernels may be called from
 *   many threads at once. The host may call init more than once in one process (once per host
 * runtime), each call with its own state.
 *
 * Never
 *   let a C++ exception, longjmp or signal cross this boundary; call exit(); change the
 *   process environment; unload libraries the host loaded.
 */
#ifndef BACKPLANE_PLUGIN_H_
#define BACKPLANE_PLUGIN_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BP_ABI_VERSION_MAJOR 1
#define BP_ABI_VERSION_MINOR 6

#if defined(_WIN32)
#define BP_PLUGIN_EXPORT __declspec(dllexport)
#else
#define BP_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* The one symbol a plugin exports. */
#define BP_ENTRY_SYMBOL "backplane_plugin_get_api"

/* Size of TYPE up to and including LAST_FIELD: how the host pins the size of each ABI version. */
#define BP_STRUCT_SIZE(TYPE, LAST_FIELD) \
  (offsetof(TYPE, LAST_FIELD) + sizeof(((TYPE*)0)->LAST_FIELD))

typedef enum bp_status_code {
  BP_OK = 0,
  BP_INVALID_ARGUMENT = 1,
  BP_NOT_FOUND = 2,
  BP_ALREADY_EXISTS = 3,
  BP_UNAVAILABLE = 4,
  BP_UNIMPLEMENTED = 5,
  BP_INTERNAL = 6,
  BP_OUT_OF_MEMORY = 7
} bp_status_code;

typedef enum bp_log_level {
  BP_LOG_ERROR = 0,
  BP_LOG_WARN = 1,
  BP_LOG_INFO = 2,
  BP_LOG_DEBUG = 3
} bp_log_level;

/* An error: a code and a message. Opaque; made and freed by the host. */
typedef struct bp_status bp_status;

/* Host-side state behind bp_host_api and bp_registrar. Opaque to plugins. */
typedef struct bp_host_context bp_host_context;
typedef struct bp_registrar_context bp_registrar_context;

/* The plugin's own per-init state. Opaque to the host. */
typedef struct bp_plugin_state bp_plugin_state;

/* What the host offers a plugin for its whole life (init until shutdown returns). */
typedef struct bp_host_api {
  size_t struct_size;
  void* extension;
  uint32_t abi_major; /* the host's ABI version */
  uint32_t abi_minor;
  bp_host_context* context;
  /* Makes a status with a copy of message. Thread-safe. Returns NULL only for BP_OK. */
  bp_status* (*status_new)(bp_host_context* context, bp_status_code code, const char* message);
  /* Logs one line under the plugin's name; the host filters by BACKPLANE_LOG. Thread-safe. */
  void (*log)(bp_host_context* context, bp_log_level level, const char* message);
  /* ---- 1.2 ---- */
  /* Frees a status the plugin received from the host and will not return (a refused
   * registration it chose to skip). NULL is ignored. */
  void (*status_free)(bp_host_context* context, bp_status* status);
  /* The message of a status; valid until the status is freed or returned. */
  const char* (*status_message)(bp_host_context* context, const bp_status* status);
  /* ---- 1.5 ---- */
  /* The value the host application gave this plugin for `key` (RuntimeOptions::plugin_settings;
   * the sim plugin's "topology"), or NULL when it gave none. Valid until shutdown returns.
   * Thread-safe. A plugin checks struct_size first: a 1.4 host has no such field. */
  const char* (*setting)(bp_host_context* context, const char* key);
} bp_host_api;
#define BP_HOST_API_SIZE_1_0 BP_STRUCT_SIZE(bp_host_api, log)

/* A named value shown with a device (hwprobe's "properties"). Frozen: this struct never grows;
 * a new kind of value gets a new bp_value_kind. */
typedef enum bp_value_kind {
  BP_VALUE_STRING = 0,
  BP_VALUE_INT64 = 1,
  BP_VALUE_FLOAT64 = 2,
  BP_VALUE_BOOL = 3,
  BP_VALUE_STRING_LIST = 4
} bp_value_kind;

typedef struct bp_string_list {
  const char* const* items;
  size_t count;
} bp_string_list;

typedef struct bp_property {
  const char* name; /* [a-z0-9_]+, unique within one device */
  bp_value_kind kind;
  union {
    const char* string;
    int64_t int64;
    double float64;
    int32_t boolean;
    bp_string_list string_list;
  } value;
} bp_property;

/* Properties of a device type (one backend), used by the selection rules. */
typedef enum bp_device_type_flag {
  BP_TYPE_ACCELERATOR = 1u << 0,    /* not the host CPU */
  BP_TYPE_AUTO_PLACEMENT = 1u << 1, /* device_map="auto" may place modules on it */
  BP_TYPE_SIMULATED = 1u << 2       /* 1.2: described, not found; stands in for the real one */
} bp_device_type_flag;

typedef struct bp_device_type_desc {
  size_t struct_size;
  void* extension;
  const char* name;               /* device string name, [a-zA-Z_]+, also listed in the manifest */
  const char* hub_key;            /* Hub-kernel device key ("cuda", "rocm"); NULL: same as name */
  const char* collective_backend; /* "nccl", "gloo", ...; NULL: none */
  int32_t training_priority;      /* training selection order, lower first; 0: never automatic */
  uint32_t flags;                 /* bp_device_type_flag bits */
  int32_t available;              /* nonzero when the backend can run work here */
  const char* unavailable_reason; /* required when !available: specific, for a person to act on */
} bp_device_type_desc;
#define BP_DEVICE_TYPE_DESC_SIZE_1_0 BP_STRUCT_SIZE(bp_device_type_desc, unavailable_reason)

typedef enum bp_device_capability {
  BP_CAP_FP16 = 1u << 0,
  BP_CAP_BF16 = 1u << 1,
  BP_CAP_TF32 = 1u << 2,
  BP_CAP_FP8 = 1u << 3,
  BP_CAP_FP64 = 1u << 4,
  BP_CAP_UNIFIED_MEMORY = 1u << 5
} bp_device_capability;

typedef struct bp_device_desc {
  size_t struct_size;
  void* extension;
  const char* type;                 /* a type this plugin registered */
  int32_t index;                    /* logical index: 0..n-1 per type, in enumeration order */
  int32_t physical_index;           /* index before visibility variables; -1: unknown */
  const char* name;                 /* "NVIDIA H100 80GB HBM3" */
  const char* vendor;               /* "NVIDIA", "AMD", "Intel"; NULL: unknown */
  const char* uuid;                 /* NULL: unknown */
  const char* pci_bus_id;           /* "0000:18:00.0"; NULL: none */
  const char* arch;                 /* "sm_90", "gfx90a", "x86_64"; NULL: unknown */
  int32_t compute_capability_major; /* -1: not applicable */
  int32_t compute_capability_minor;
  uint64_t memory_total; /* bytes */
  uint64_t capabilities; /* bp_device_capability bits */
  int32_t simulated;     /* nonzero for devices described, not found */
  const bp_property* properties;
  size_t property_count;
  /* ---- 1.2 ---- */
  /* The variable that mapped physical_index to index ("CUDA_VISIBLE_DEVICES"); NULL: none. */
  const char* visibility_variable;
} bp_device_desc;
#define BP_DEVICE_DESC_SIZE_1_0 BP_STRUCT_SIZE(bp_device_desc, property_count)

/* ---- 1.3: kernels ----
 * A kernel is a function pointer into the plugin, keyed by (op, implementation, device type),
 * with the requirements the host checks before handing it out. Tensors cross as DLPack
 * DLTensor (dlpack/dlpack.h, Debian libdlpack-dev); the host resolves a kernel once and calls it
 * many times. */

typedef struct bp_kernel_desc {
  size_t struct_size;
  void* extension;
  const char* op;                       /* "attention_forward" */
  const char* implementation;           /* "sdpa", "eager", "flash_attention_2" */
  const char* device_type;              /* a type this plugin registered */
  int32_t min_compute_capability_major; /* -1: no minimum */
  int32_t min_compute_capability_minor;
  const char* const* dtypes; /* "float32", "bfloat16", "float16"; count 0: any */
  size_t dtype_count;
  int32_t max_head_dim;   /* 0: no limit */
  void (*function)(void); /* the op's function type (below), cast by the caller */
  void* context;          /* passed back to the function; the plugin's, valid until shutdown */
} bp_kernel_desc;
#define BP_KERNEL_DESC_SIZE_1_3 BP_STRUCT_SIZE(bp_kernel_desc, context)

/* op "attention_forward": out = softmax(q k^T * scale + mask) v, per (batch, head). q is
 * [batch, heads_q, seq_q, head_dim], k and v [batch, heads_kv, seq_k, head_dim] (heads_q a
 * multiple of heads_kv), mask (optional) broadcastable to [batch, heads_q, seq_q, seq_k]: bool
 * (true keeps) or additive; causal is aligned bottom-right. Strides in elements. */
typedef struct bp_attention_args {
  size_t struct_size;
  void* extension;
  const DLTensor* query;
  const DLTensor* key;
  const DLTensor* value;
  const DLTensor* mask; /* NULL: none */
  const DLTensor* output;
  int32_t causal;
  double scale; /* <= 0: 1 / sqrt(head_dim) */
  void* stream; /* the device's stream; NULL: the default one */
  /* ---- 1.6 ---- */
  /* Optional output for training, float32 [batch, heads_q, seq_q]: each row's natural
   * log-sum-exp of its scaled, masked scores (-inf for a row that sees no key), what
   * attention_backward reads. A kernel that does not write it refuses the call rather than
   * leave it unwritten; a plugin that registers attention_backward writes it in the
   * attention_forward of the same implementation. Kernels of plugins older than 1.6 never read
   * it: the host passes one only to a plugin that registered attention_backward. */
  const DLTensor* logsumexp;
} bp_attention_args;
typedef bp_status* (*bp_attention_forward_fn)(void* context, const bp_attention_args* args);
#define BP_ATTENTION_ARGS_SIZE_1_3 BP_STRUCT_SIZE(bp_attention_args, stream)
#define BP_ATTENTION_ARGS_SIZE_1_6 BP_STRUCT_SIZE(bp_attention_args, logsumexp)

/* ---- 1.4: layer ops ----
 * The ops of the layers Hub kernels replace (RMSNorm, gated activations, rotary embedding), with
 * attention_forward's conventions: DLPack tensors, strides in elements (NULL: compact
 * row-major), byte_offset honoured, `stream` the device's stream (NULL: the default one). The
 * last dim of every tensor must be contiguous (stride 1); the leading dims may have any strides.
 * dtypes float32, bfloat16, float16 (all tensors of one call share one, except where said);
 * the arithmetic is float32 and each result is rounded once to the output's dtype. */

/* op "rms_norm": per row of `hidden` values, out = x * rsqrt(mean(x^2) + epsilon) * weight.
 * input [..., hidden], weight [hidden], output the shape of input; output may be input itself
 * (same data and strides: in place), no other overlap. With residual (the shape of input), the
 * fused residual add first: residual = residual + input (rounded to the dtype, written in
 * place), then out = rms_norm(residual) from the rounded sum; vLLM's fused_add_rms_norm(input,
 * residual, weight, epsilon) is this with output = input. residual may overlap nothing else. */
typedef struct bp_rms_norm_args {
  size_t struct_size;
  void* extension;
  const DLTensor* input;
  const DLTensor* weight;
  const DLTensor* residual; /* NULL: plain RMSNorm */
  const DLTensor* output;
  double epsilon; /* >= 0 */
  void* stream;
} bp_rms_norm_args;
#define BP_RMS_NORM_ARGS_SIZE_1_4 BP_STRUCT_SIZE(bp_rms_norm_args, stream)
typedef bp_status* (*bp_rms_norm_fn)(void* context, const bp_rms_norm_args* args);

/* ops "silu_and_mul", "gelu_and_mul" (exact GELU, with erf) and "gelu_tanh_and_mul" (GELU's
 * tanh approximation): input [..., 2 * d], output [..., d],
 *   out = act(input[..., :d]) * input[..., d:]
 * output must not overlap input. */
typedef struct bp_gated_activation_args {
  size_t struct_size;
  void* extension;
  const DLTensor* input;
  const DLTensor* output;
  void* stream;
} bp_gated_activation_args;
#define BP_GATED_ACTIVATION_ARGS_SIZE_1_4 BP_STRUCT_SIZE(bp_gated_activation_args, stream)
typedef bp_status* (*bp_gated_activation_fn)(void* context, const bp_gated_activation_args* args);

/* op "rotary_embedding": rotates query and key in place by position-dependent angles. query
 * [batch, heads_q, seq, head_dim], key [batch, heads_k, seq, head_dim] (a [batch, seq, heads,
 * head_dim] tensor passes as a view with permuted strides); cos and sin [seq, rotary_dim / 2]
 * or [batch, seq, rotary_dim / 2], float32 or query's dtype: cos(position * inv_freq[i]),
 * i < rotary_dim / 2, not repeated. rotary_dim <= head_dim; dims from rotary_dim on are left
 * as they are (partial rotary). For each pair (x1, x2), with c and s of its i:
 *   x1' = x1 * c - x2 * s,   x2' = x2 * c + x1 * s
 * where the pairs are (x[i], x[i + rotary_dim / 2]) in BP_ROTARY_NEOX style (rotate halves,
 * transformers' apply_rotary_pos_emb) and (x[2i], x[2i + 1]) in BP_ROTARY_INTERLEAVED style
 * (GPT-J). query and key may not overlap each other, cos or sin. */
typedef enum bp_rotary_style { BP_ROTARY_NEOX = 0, BP_ROTARY_INTERLEAVED = 1 } bp_rotary_style;
typedef struct bp_rotary_embedding_args {
  size_t struct_size;
  void* extension;
  const DLTensor* query;
  const DLTensor* key; /* NULL: query only */
  const DLTensor* cos;
  const DLTensor* sin;
  int32_t style; /* bp_rotary_style */
  void* stream;
} bp_rotary_embedding_args;
#define BP_ROTARY_EMBEDDING_ARGS_SIZE_1_4 BP_STRUCT_SIZE(bp_rotary_embedding_args, stream)
typedef bp_status* (*bp_rotary_embedding_fn)(void* context, const bp_rotary_embedding_args* args);

/* ---- 1.6: backward ops ----
 * The gradients of the ops above, for training, registered with add_kernel like them (same
 * implementation names, device types and requirements). Conventions as the forward ops'; the
 * gradients have their operands' shapes and dtype, are written (never accumulated into) and
 * overlap nothing they are computed from or each other, except where said. */

/* op "attention_backward": the gradients of attention_forward with the same causal and scale,
 * from the forward's operands, its output and its saved logsumexp (required), and the output's
 * gradient. grad_key and grad_value are summed over the query heads of each group; the mask
 * gets no gradient. Rows that saw no key contribute nothing. */
typedef struct bp_attention_backward_args {
  size_t struct_size;
  void* extension;
  const DLTensor* query;
  const DLTensor* key;
  const DLTensor* value;
  const DLTensor* mask; /* NULL: none */
  const DLTensor* output;
  const DLTensor* logsumexp;   /* float32 [batch, heads_q, seq_q], as the forward wrote it */
  const DLTensor* grad_output; /* [batch, heads_q, seq_q, head_dim_v] */
  const DLTensor* grad_query;  /* written */
  const DLTensor* grad_key;    /* written */
  const DLTensor* grad_value;  /* written */
  int32_t causal;
  double scale; /* <= 0: 1 / sqrt(head_dim) */
  void* stream;
} bp_attention_backward_args;
#define BP_ATTENTION_BACKWARD_ARGS_SIZE_1_6 BP_STRUCT_SIZE(bp_attention_backward_args, stream)
typedef bp_status* (*bp_attention_backward_fn)(void* context,
                                               const bp_attention_backward_args* args);

/* op "rms_norm_backward": from the output's gradient and the rows the forward normalized (its
 * input; with the fused residual add, the updated residual), r = rsqrt(mean(x^2) + epsilon):
 *   grad_input  = r (g weight - x r^2 mean(g weight x)) (+ grad_residual)   per row
 *   grad_weight = sum over the rows of g x r, summed in float32 in an order that does not
 *                 depend on threads or scheduling, rounded once
 * grad_residual (optional, the shape of input): the gradient reaching the updated residual
 * from the layers after it, added in; grad_input is then the gradient of both the input and
 * the residual before the add. */
typedef struct bp_rms_norm_backward_args {
  size_t struct_size;
  void* extension;
  const DLTensor* grad_output;
  const DLTensor* input;
  const DLTensor* weight;
  const DLTensor* grad_residual; /* NULL: none */
  const DLTensor* grad_input;    /* written, the shape of input */
  const DLTensor* grad_weight;   /* written, [hidden] */
  double epsilon;
  void* stream;
} bp_rms_norm_backward_args;
#define BP_RMS_NORM_BACKWARD_ARGS_SIZE_1_6 BP_STRUCT_SIZE(bp_rms_norm_backward_args, stream)
typedef bp_status* (*bp_rms_norm_backward_fn)(void* context, const bp_rms_norm_backward_args* args);

/* ops "silu_and_mul_backward", "gelu_and_mul_backward", "gelu_tanh_and_mul_backward": from the
 * output's gradient [..., d] and the forward's input [..., 2 * d] (the activation recomputed
 * from it), grad_input [..., 2 * d]:
 *   grad_input[..., :d] = grad_output * input[..., d:] * act'(input[..., :d])
 *   grad_input[..., d:] = grad_output * act(input[..., :d]) */
typedef struct bp_gated_activation_backward_args {
  size_t struct_size;
  void* extension;
  const DLTensor* grad_output;
  const DLTensor* input;
  const DLTensor* grad_input; /* written */
  void* stream;
} bp_gated_activation_backward_args;
#define BP_GATED_ACTIVATION_BACKWARD_ARGS_SIZE_1_6 \
  BP_STRUCT_SIZE(bp_gated_activation_backward_args, stream)
typedef bp_status* (*bp_gated_activation_backward_fn)(
    void* context, const bp_gated_activation_backward_args* args);

/* op "rotary_embedding_backward": bp_rotary_embedding_args with query and key the gradients of
 * the rotated query and key, rotated back in place (the rotation is orthogonal:
 * x1 c + x2 s, x2 c - x1 s); bp_rotary_embedding_fn. */

/* ---- 1.4: default layer kernels ----
 * A plugin's default Hub-kernel substitution (docs/device-rules.md §7.1, the kernels library's
 * kernel mapping): on devices whose Hub key is `device_key`, the model layer `layer` ("RMSNorm")
 * may be replaced by the layer `kernel_layer` of the Hub repo `repo` ("org/repo") in the modes of
 * `mode`. A user's mapping (KernelConfig) overrides these. */
typedef enum bp_kernel_mode {
  BP_KERNEL_MODE_FALLBACK = 1u << 0, /* alone: used when no other mode matches */
  BP_KERNEL_MODE_TRAINING = 1u << 1,
  BP_KERNEL_MODE_INFERENCE = 1u << 2,
  BP_KERNEL_MODE_TORCH_COMPILE = 1u << 3 /* with TRAINING or INFERENCE */
} bp_kernel_mode;

typedef struct bp_layer_kernel_desc {
  size_t struct_size;
  void* extension;
  const char* layer;        /* the model layer's name: "RMSNorm", "SiluAndMul" */
  const char* device_key;   /* the Hub key of a device type this plugin registered */
  uint32_t mode;            /* bp_kernel_mode bits */
  int32_t min_capability;   /* cuda and rocm: major * 10 + minor; -1: no minimum */
  int32_t max_capability;   /* -1: no maximum */
  const char* repo;         /* "org/repo" */
  const char* kernel_layer; /* the layer's name in the repo */
  const char* revision;     /* NULL: the repo's default */
  int32_t version;          /* the kernel version; 0: none */
} bp_layer_kernel_desc;
#define BP_LAYER_KERNEL_DESC_SIZE_1_4 BP_STRUCT_SIZE(bp_layer_kernel_desc, version)

/* Passed to init; valid only during init. Each call returns NULL or a status the plugin owns
 * (usually returned from init as it is). */
typedef struct bp_registrar {
  size_t struct_size;
  void* extension;
  bp_registrar_context* context;
  bp_status* (*add_device_type)(bp_registrar_context* context, const bp_device_type_desc* desc);
  bp_status* (*add_device)(bp_registrar_context* context, const bp_device_desc* desc);
  /* ---- 1.3 ---- */
  bp_status* (*add_kernel)(bp_registrar_context* context, const bp_kernel_desc* desc);
  /* ---- 1.4 ---- */
  bp_status* (*add_layer_kernel)(bp_registrar_context* context, const bp_layer_kernel_desc* desc);
} bp_registrar;
#define BP_REGISTRAR_SIZE_1_0 BP_STRUCT_SIZE(bp_registrar, add_device)

typedef struct bp_plugin_api {
  size_t struct_size;
  void* extension;
  uint32_t abi_major; /* the ABI the plugin was built against */
  uint32_t abi_minor;
  const char* name;    /* the manifest's plugin name */
  const char* version; /* the plugin's own version, free form */
  /* Registers device types and devices. Required. `state` (out) is passed back to every later
   * call; it may be NULL. On error the host calls nothing else, shutdown included. */
  bp_status* (*init)(const bp_host_api* host, const bp_registrar* registrar,
                     bp_plugin_state** state);
  /* Optional. Called once, after the last use of anything from this init. */
  void (*shutdown)(bp_plugin_state* state);
  /* ---- 1.1 ---- */
  /* Optional. Free and total bytes of one registered device now. Thread-safe. */
  bp_status* (*memory_info)(bp_plugin_state* state, const char* type, int32_t index,
                            uint64_t* free_bytes, uint64_t* total_bytes);
} bp_plugin_api;
#define BP_PLUGIN_API_SIZE_1_0 BP_STRUCT_SIZE(bp_plugin_api, shutdown)

/* The entry symbol. The host passes its ABI version; the plugin returns its table, or NULL when
 * it cannot serve a host of that major version. */
typedef const bp_plugin_api* (*bp_get_api_fn)(uint32_t host_abi_major, uint32_t host_abi_minor);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* BACKPLANE_PLUGIN_H_ */
