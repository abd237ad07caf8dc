// libggml-tern: a ggml backend that runs ternary MUL_MAT (TQ1_0, TQ2_0, Q2_0 weights with
// F32 activations) on tern's kernels, on the weights where ggml loaded them.
// docs/ggml-backend.md has the two ways in (GGML_BACKEND_PATH, ggml_backend_register).
#pragma once

#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

// The registry: one device, named "tern" (type ACCEL, host buffers). NULL when the ggml
// this runs against is not the version the backend was built against (an error is logged).
GGML_BACKEND_API ggml_backend_reg_t ggml_backend_tern_reg(void);

// A backend on that device (what ggml_backend_dev_init does); NULL as above.
GGML_BACKEND_API ggml_backend_t ggml_backend_tern_init(void);

#ifdef __cplusplus
}
#endif
