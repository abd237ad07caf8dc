// What libggml-tern must get right that test-backend-ops has no ternary case for:
//  - batched and broadcast MUL_MATs (batch dims of the activation multiples of the
//    weight's) and several MUL_MATs on one activation (one tern_matmul_many) compute the
//    right numbers;
//  - the shapes and types it cannot do are refused by supports_op;
//  - how far tern's per-token int8 activations drift from an f64 reference, next to the
//    CPU backend's per-256-block Q8_K, on Gaussian activations and on activations with
//    outlier channels (as real LLM activations have).
// Built two ways, for the two ways in: against a ggml built with GGML_BACKEND_DL, with the
// backend loaded from GGML_BACKEND_PATH; and with TERN_GGML_REGISTER, linked with
// libggml-tern.a and registering it with ggml_backend_register, as an engine does.
#include "ggml-backend.h"
#include "ggml.h"
#ifdef TERN_GGML_REGISTER
#    include "ggml-tern.h"
#endif

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace {

int g_failures = 0;

void check(bool ok, const char * what) {
    if (!ok) {
        fprintf(stderr, "FAIL: %s\n", what);
        g_failures++;
    }
}

struct mul_mat_case {
    const char * name;
    ggml_type    type;
    int64_t      k, n, m;
    int64_t      w2, w3, a2, a3;  // batch dims of the weight and of the activation
    int          n_weights;       // MUL_MATs on the one activation
    bool         outliers;        // a few activation channels 30x the others
    bool         every_code;      // Q2_0: random code bytes, so +2 (code 3) as well as the trits
    double       max_ratio;       // bound on tern's error over the CPU backend's
};

ggml_context * new_context() {
    ggml_init_params params = {ggml_tensor_overhead() * 64 + ggml_graph_overhead(), nullptr, true};
    return ggml_init(params);
}

// Relative L2 distance of `got` from the f64 reference.
double rel_error(const std::vector<float> & got, const std::vector<double> & ref) {
    double d = 0, r = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        d += (got[i] - ref[i]) * (got[i] - ref[i]);
        r += ref[i] * ref[i];
    }
    return std::sqrt(d / r);
}

void run_case(ggml_backend_t tern, ggml_backend_t cpu, const mul_mat_case & c, std::mt19937 & rng) {
    ggml_context *             ctx = new_context();
    ggml_tensor *              a   = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, c.k, c.m, c.a2, c.a3);
    std::vector<ggml_tensor *> weights, outs;
    ggml_cgraph *              graph = ggml_new_graph(ctx);
    for (int i = 0; i < c.n_weights; ++i) {
        weights.push_back(ggml_new_tensor_4d(ctx, c.type, c.k, c.n, c.w2, c.w3));
        outs.push_back(ggml_mul_mat(ctx, weights.back(), a));
        ggml_build_forward_expand(graph, outs.back());
        check(ggml_backend_supports_op(tern, outs.back()), c.name);
    }
    ggml_backend_buffer_t buffer = ggml_backend_alloc_ctx_tensors(ctx, cpu);

    std::normal_distribution<float> normal;
    std::vector<float>              act(ggml_nelements(a));
    for (size_t i = 0; i < act.size(); ++i) {
        act[i] = normal(rng) * (c.outliers && i % c.k % 97 == 0 ? 30.0f : 1.0f);
    }
    ggml_backend_tensor_set(a, act.data(), 0, ggml_nbytes(a));

    // Ternary weights as a BitNet checkpoint has them, quantized by ggml (whose Q2_0
    // quantizer never writes code 3, +2: every_code writes random code bytes after each
    // block's f16 scale instead), and what they decode to.
    std::vector<std::vector<float>> decoded;
    for (ggml_tensor * w : weights) {
        std::vector<float> trits(ggml_nelements(w));
        for (float & t : trits) {
            t = (float) ((int) (rng() % 3) - 1) * 0.02f;
        }
        std::vector<uint8_t> bytes(ggml_nbytes(w));
        ggml_quantize_chunk(c.type, trits.data(), bytes.data(), 0, ggml_nrows(w), c.k, nullptr);
        for (size_t i = 0; c.every_code && i < bytes.size(); ++i) {
            if (i % ggml_type_size(c.type) >= sizeof(ggml_fp16_t)) {
                bytes[i] = (uint8_t) rng();
            }
        }
        ggml_backend_tensor_set(w, bytes.data(), 0, bytes.size());
        decoded.emplace_back(trits.size());
        ggml_get_type_traits(c.type)->to_float(bytes.data(), decoded.back().data(), (int64_t) trits.size());
    }

    double worst[2] = {0, 0};  // tern, CPU
    for (int b = 0; b < 2; ++b) {
        check(ggml_backend_graph_compute(b == 0 ? tern : cpu, graph) == GGML_STATUS_SUCCESS, c.name);
        for (size_t i = 0; i < outs.size(); ++i) {
            std::vector<float> got(ggml_nelements(outs[i]));
            ggml_backend_tensor_get(outs[i], got.data(), 0, ggml_nbytes(outs[i]));
            std::vector<double> ref(got.size());
            const int64_t       r2 = c.a2 / c.w2, r3 = c.a3 / c.w3;
            for (int64_t i3 = 0; i3 < c.a3; ++i3) {
                for (int64_t i2 = 0; i2 < c.a2; ++i2) {
                    const float * w = decoded[i].data() + ((i3 / r3) * c.w2 + i2 / r2) * c.n * c.k;
                    const float * x = act.data() + (i3 * c.a2 + i2) * c.m * c.k;
                    for (int64_t t = 0; t < c.m; ++t) {
                        for (int64_t r = 0; r < c.n; ++r) {
                            double s = 0;
                            for (int64_t j = 0; j < c.k; ++j) {
                                s += (double) w[r * c.k + j] * x[t * c.k + j];
                            }
                            ref[((i3 * c.a2 + i2) * c.m + t) * c.n + r] = s;
                        }
                    }
                }
            }
            worst[b] = std::fmax(worst[b], rel_error(got, ref));
        }
    }
    printf("%-44s relative L2 error against f64: tern %.5f, CPU %.5f\n", c.name, worst[0], worst[1]);
    // A wrong slice, layout or kernel is off by ~100%; 8-bit activations by 1-6%. tern
    // quantizes activations per block as ggml does: for TQ1_0/TQ2_0 per 256 elements as
    // Q8_K (I8_BLOCK256), for Q2_0 per 32 as Q8_0 (I8_BLOCK32, whose f32 scale Q8_0 rounds
    // to f16): the same error up to ties rounded otherwise, bounded at 1.1x.
    check(worst[0] < 0.25, c.name);
    check(worst[0] <= c.max_ratio * worst[1], c.name);
    ggml_backend_buffer_free(buffer);
    ggml_free(ctx);
}

void check_refusals(ggml_backend_t tern) {
    ggml_context * ctx  = new_context();
    ggml_tensor *  tq2  = ggml_new_tensor_2d(ctx, GGML_TYPE_TQ2_0, 512, 16);
    ggml_tensor *  act  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 512, 4);
    ggml_tensor *  q4   = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, 512, 16);
    ggml_tensor *  f16  = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 512, 4);
    ggml_tensor *  half = ggml_view_2d(ctx, tq2, 256, 16, tq2->nb[1], 0);  // rows strided
    ggml_tensor *  act2 = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 4);
    ggml_tensor *  actT = ggml_transpose(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 512));
    check(ggml_backend_supports_op(tern, ggml_mul_mat(ctx, tq2, act)), "TQ2_0 x F32 is claimed");
    check(!ggml_backend_supports_op(tern, ggml_mul_mat(ctx, q4, act)), "Q4_0 is refused");
    check(!ggml_backend_supports_op(tern, ggml_mul_mat(ctx, tq2, f16)), "F16 activations are refused");
    check(!ggml_backend_supports_op(tern, ggml_mul_mat(ctx, half, act2)), "a non-contiguous weight is refused");
    check(!ggml_backend_supports_op(tern, ggml_mul_mat(ctx, tq2, actT)), "transposed activations are refused");
    check(!ggml_backend_supports_op(tern, ggml_add(ctx, act, act)), "ADD is refused");
    ggml_free(ctx);
}

}  // namespace

int main() {
#ifdef TERN_GGML_REGISTER
    ggml_backend_reg_t reg = ggml_backend_tern_reg();
    if (reg == nullptr) {
        fprintf(stderr, "FAIL: ggml_backend_tern_reg() returned NULL\n");
        return 1;
    }
    ggml_backend_register(reg);
#endif
    ggml_backend_load_all();  // the CPU backend (and GGML_BACKEND_PATH's, if set)
    ggml_backend_dev_t tern_dev = ggml_backend_dev_by_name("tern");
    if (tern_dev == nullptr) {
        fprintf(stderr, "FAIL: no tern device (GGML_BACKEND_PATH, or registered)\n");
        return 1;
    }
    printf("tern device: %s\n", ggml_backend_dev_description(tern_dev));
    ggml_backend_t tern = ggml_backend_dev_init(tern_dev, nullptr);
    ggml_backend_t cpu  = ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, nullptr);

    check_refusals(tern);
    const mul_mat_case cases[] = {
        {"TQ2_0 batched 2x3, broadcast to 4x3", GGML_TYPE_TQ2_0, 512, 16, 5, 2, 3, 4, 3, 1, false, false, 1.1},
        {"TQ1_0 batched 1x2, broadcast to 3x2", GGML_TYPE_TQ1_0, 256, 8, 3, 1, 2, 3, 2, 1, false, false, 1.1},
        {"Q2_0 batched 2x3, broadcast to 4x3", GGML_TYPE_Q2_0, 512, 16, 5, 2, 3, 4, 3, 1, false, false, 1.1},
        {"TQ2_0 three weights on one activation", GGML_TYPE_TQ2_0, 1024, 32, 7, 1, 1, 1, 1, 3, false, false, 1.1},
        {"Q2_0 three weights on one activation", GGML_TYPE_Q2_0, 1024, 32, 7, 1, 1, 1, 1, 3, false, false, 1.1},
        {"Q2_0 every code (+2 too), 64-element rows", GGML_TYPE_Q2_0, 64, 16, 3, 1, 1, 1, 1, 1, false, true, 1.1},
        {"Q2_0 every code (+2 too), 40 tokens", GGML_TYPE_Q2_0, 2560, 64, 40, 1, 1, 1, 1, 1, false, true, 1.1},
        {"TQ2_0 2560 -> 512, 8 tokens, Gaussian", GGML_TYPE_TQ2_0, 2560, 512, 8, 1, 1, 1, 1, 1, false, false, 1.1},
        {"TQ1_0 6912 -> 256, 8 tokens, Gaussian", GGML_TYPE_TQ1_0, 6912, 256, 8, 1, 1, 1, 1, 1, false, false, 1.1},
        {"Q2_0 2560 -> 512, 8 tokens, Gaussian", GGML_TYPE_Q2_0, 2560, 512, 8, 1, 1, 1, 1, 1, false, false, 1.1},
        {"TQ2_0 2560 -> 512, 8 tokens, outliers", GGML_TYPE_TQ2_0, 2560, 512, 8, 1, 1, 1, 1, 1, true, false, 1.1},
        {"TQ1_0 6912 -> 256, 8 tokens, outliers", GGML_TYPE_TQ1_0, 6912, 256, 8, 1, 1, 1, 1, 1, true, false, 1.1},
        {"Q2_0 2560 -> 512, 8 tokens, outliers", GGML_TYPE_Q2_0, 2560, 512, 8, 1, 1, 1, 1, 1, true, false, 1.1},
    };
    std::mt19937 rng(26);
    for (const mul_mat_case & c : cases) {
        run_case(tern, cpu, c, rng);
    }
    ggml_backend_free(cpu);
    ggml_backend_free(tern);
    if (g_failures != 0) {
        fprintf(stderr, "%d check(s) failed\n", g_failures);
        return 1;
    }
    printf("ops: all checks passed\n");
    return 0;
}
