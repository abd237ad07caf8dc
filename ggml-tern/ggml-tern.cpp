// libggml-tern: ternary MUL_MAT for ggml on tern's kernels.
//
// An ACCEL device on host buffers, like ggml-blas: the weights stay in the buffers ggml
// loaded them into (tern_tensor_wrap borrows their bytes, nothing is repacked or copied)
// and the scheduler sends a MUL_MAT here only when supports_op claims it, so every node
// graph_compute sees has been checked. Everything else stays on the CPU backend.

#include "ggml-tern.h"

#include "ggml-backend-impl.h"
#include "ggml-impl.h"
#include "tern.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#ifndef TERN_GGML_VERSION
#error "the build defines TERN_GGML_VERSION, the ggml version of the headers"
#endif

namespace {

// The ggml types this backend can claim, in tern's terms.
struct ternary_type {
    ggml_type type;
    uint32_t format;
};
constexpr ternary_type k_ternary_types[] = {
    {GGML_TYPE_TQ1_0, TERN_FORMAT_TQ1_0},
    {GGML_TYPE_TQ2_0, TERN_FORMAT_TQ2_0},
    {GGML_TYPE_Q2_0, TERN_FORMAT_Q2_0},
};
constexpr size_t k_n_types = sizeof(k_ternary_types) / sizeof(k_ternary_types[0]);

struct tensor_deleter {
    void operator()(tern_tensor * t) const { tern_tensor_free(t); }
};
using tensor_ptr = std::unique_ptr<tern_tensor, tensor_deleter>;

struct dispatcher_deleter {
    void operator()(tern_dispatcher * d) const { tern_dispatcher_free(d); }
};
using dispatcher_ptr = std::unique_ptr<tern_dispatcher, dispatcher_deleter>;

struct scope_deleter {
    void operator()(tern_scope * s) const { tern_scope_free(s); }
};
using scope_ptr = std::unique_ptr<tern_scope, scope_deleter>;

// Logs a failed tern call (`about`: the tensor or format it was for); true when it succeeded.
bool tern_ok(tern_status status, const char * call, const char * about = "") {
    if (status == TERN_OK) {
        return true;
    }
    GGML_LOG_ERROR("ggml-tern: %s%s%s failed: %s: %s\n", call, *about ? " for " : "", about,
                   tern_status_str(status), tern_last_error());
    return false;
}

// Whose threads run the tasks of a split matmul. llama.cpp computes the CPU backend's graph
// splits and this backend's one after the other from one thread. ggml's CPU backend built
// with OpenMP (its default where the compiler has it) runs each split as an OpenMP parallel
// region from that thread, and the team's threads spin for a while after it, waiting for
// the next one. A pool of tern's own beside that team puts two busy pools on the same
// cores: on 2 vCPUs, 2-thread decode with tern's pool was no faster than 1-thread decode and
// 0.7x the CPU backend alone (docs/ggml-backend.md). So where the CPU backend reports
// OPENMP, tern's tasks run as an OpenMP loop from the computing thread, and the OpenMP
// runtime gives it the team that has just run the CPU backend's split, its threads awake.
enum class executor { tern_pool, ggml_openmp };

const char * executor_name(executor e) {
    return e == executor::ggml_openmp ? "the OpenMP team of ggml's CPU backend" : "tern's own pool";
}

// Whether ggml's CPU backend is registered and was built with OpenMP (its feature list).
bool ggml_cpu_uses_openmp() {
    ggml_backend_reg_t cpu = ggml_backend_reg_by_name("CPU");
    auto get_features = cpu == nullptr ? nullptr :
                                         (ggml_backend_get_features_t) ggml_backend_reg_get_proc_address(
                                             cpu, "ggml_backend_get_features");
    for (ggml_backend_feature * f = get_features ? get_features(cpu) : nullptr; f != nullptr && f->name != nullptr;
         ++f) {
        if (std::strcmp(f->name, "OPENMP") == 0) {
            return std::strcmp(f->value, "1") == 0;
        }
    }
    return false;
}

executor choose_executor() {
#ifdef _OPENMP
    if (ggml_cpu_uses_openmp()) {
        return executor::ggml_openmp;
    }
#endif
    return executor::tern_pool;
}

#ifdef _OPENMP
// tern_parallel_for_fn over OpenMP; `pool` points at the thread count. Each task once, on
// the team's threads, and the region ends when all have finished.
void openmp_parallel_for(void * pool, size_t n_tasks, tern_task_fn task, void * task_ctx) {
    const int n_threads = *static_cast<const int *>(pool);
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads)
    for (long long i = 0; i < (long long) n_tasks; ++i) {
        task(task_ctx, (size_t) i);
    }
}
#endif

// A strict dispatcher (never the slow decoding fallback: a pair without a dedicated
// kernel is an error, not a silent slowdown) on n_threads threads of `exec` (`n_threads`
// must outlive the dispatcher: the OpenMP executor reads it), with the accurate
// activations: TQ1_0/TQ2_0 meet activations with one scale per 256-element block
// (I8_BLOCK256), as ggml's own Q8_K, and Q2_0 with one per 32 (I8_BLOCK32), as ggml's Q8_0,
// so llama.cpp's outputs do not drift from its CPU backend's.
dispatcher_ptr new_dispatcher(const int & n_threads, executor exec) {
    tern_dispatcher_options options;
    std::memset(&options, 0, sizeof(options));
    options.struct_size = sizeof(options);
    options.n_threads   = (uint32_t) (n_threads > 0 ? n_threads : 1);
    options.flags       = TERN_DISPATCH_STRICT | TERN_DISPATCH_ACCURATE_ACTIVATIONS;
#ifdef _OPENMP
    if (exec == executor::ggml_openmp && n_threads > 1) {
        options.parallel_for = openmp_parallel_for;
        options.pool         = const_cast<int *>(&n_threads);
    }
#else
    (void) exec;
#endif
    tern_dispatcher * d = nullptr;
    if (!tern_ok(tern_dispatcher_new(&options, &d), "tern_dispatcher_new")) {
        return nullptr;
    }
    return dispatcher_ptr(d);
}

// The device's view of tern, built once: which types it claims and which kernels serve them.
struct device_context {
    executor              threads   = executor::tern_pool;
    const tern_encoding * f32       = nullptr;
    // Per k_ternary_types entry; NULL when the type is not claimed (tern lacks it, or its
    // probe found no dedicated kernel on this CPU).
    const tern_encoding * weights[k_n_types] = {};
    std::string           description;
};

void collect_kernel_name(void * userdata, const tern_event * event) {
    if (event->kind == TERN_EVENT_KERNEL_SELECTED) {
        auto * names = static_cast<std::vector<std::string> *>(userdata);
        if (std::find(names->begin(), names->end(), event->name) == names->end()) {
            names->emplace_back(event->name);
        }
    }
}

// Runs one small matmul per type at 1 token (GEMV) and at 64 tokens (GEMM) on a strict
// dispatcher: a type is claimed only if both ran, and the kernels that ran are what the
// description reports.
bool probe_type(tern_dispatcher * d, const tern_encoding * f32, const tern_encoding * enc,
                std::vector<std::string> & kernels) {
    constexpr size_t n = 8, k = 256;
    std::vector<float> w(n * k);
    for (size_t i = 0; i < w.size(); ++i) {
        w[i] = (float) ((int) (i % 3) - 1);
    }
    tern_tensor * weight = nullptr;
    if (!tern_ok(tern_tensor_encode(enc, w.data(), w.size(), n, k, &weight), "probe: tern_tensor_encode",
                 tern_encoding_name(enc))) {
        return false;
    }
    tensor_ptr weight_owner(weight);
    tern_scope * scope = nullptr;
    if (!tern_ok(tern_scope_new(0, &scope), "probe: tern_scope_new")) {
        return false;
    }
    scope_ptr scope_owner(scope);
    if (!tern_ok(tern_dispatcher_set_sink(d, collect_kernel_name, &kernels), "probe: set_sink")) {
        return false;
    }
    bool ok = true;
    for (size_t m : {(size_t) 1, (size_t) 64}) {
        std::vector<float> act(m * k, 0.5f), out(m * n);
        tern_tensor * a = nullptr;
        ok = ok && tern_ok(tern_tensor_wrap(f32, act.data(), act.size() * sizeof(float), m, k, &a),
                           "probe: tern_tensor_wrap");
        tensor_ptr a_owner(a);
        ok = ok && tern_ok(tern_matmul(d, a, weight, scope, out.data(), out.size()), "probe: tern_matmul",
                           tern_encoding_name(enc));
        ok = ok && tern_ok(tern_scope_reset(scope), "probe: tern_scope_reset");
    }
    ok = tern_ok(tern_dispatcher_set_sink(d, nullptr, nullptr), "probe: set_sink") && ok;
    return ok;
}

device_context make_device_context() {
    device_context dev;
    std::string    claimed;
    std::vector<std::string> kernels;
    static const int one = 1;
    dev.threads      = choose_executor();
    dispatcher_ptr d = new_dispatcher(one, dev.threads);
    if (d && tern_ok(tern_encoding_get(TERN_FORMAT_F32, &dev.f32), "tern_encoding_get", "F32")) {
        for (size_t i = 0; i < k_n_types; ++i) {
            const tern_encoding * enc = nullptr;
            if (tern_ok(tern_encoding_get(k_ternary_types[i].format, &enc), "tern_encoding_get",
                        ggml_type_name(k_ternary_types[i].type)) &&
                probe_type(d.get(), dev.f32, enc, kernels)) {
                dev.weights[i] = enc;
                claimed += claimed.empty() ? "" : ", ";
                claimed += ggml_type_name(k_ternary_types[i].type);
            }
        }
    }
    std::string kernel_list;
    for (const std::string & name : kernels) {
        kernel_list += kernel_list.empty() ? "" : ", ";
        kernel_list += name;
    }
    dev.description = std::string("tern ") + tern_version_string() + " (MUL_MAT " +
                      (claimed.empty() ? "none" : claimed) + "; kernels " +
                      (kernel_list.empty() ? "none" : kernel_list) + "; threads: " + executor_name(dev.threads) +
                      ")";
    return dev;
}

const device_context & the_device_context() {
    static const device_context dev = make_device_context();
    return dev;
}

// Index into k_ternary_types of a claimed type, or -1.
int claimed_type_index(ggml_type type) {
    const device_context & dev = the_device_context();
    for (size_t i = 0; i < k_n_types; ++i) {
        if (k_ternary_types[i].type == type && dev.weights[i] != nullptr) {
            return (int) i;
        }
    }
    return -1;
}

// The shapes graph_compute handles: a ternary weight whose rows are contiguous within each
// batch slice (each slice is one n x k matrix tern can wrap; the slices may be strided, as
// in a weight with its batch dims permuted); F32 activations whose rows are contiguous
// within each batch slice (the slices may be strided); a contiguous F32 output; batch dims
// of the activation that are multiples of the weight's (ggml's broadcast).
bool supports_mul_mat(const ggml_tensor * op) {
    const ggml_tensor * w = op->src[0];
    const ggml_tensor * a = op->src[1];
    return claimed_type_index(w->type) >= 0 && a->type == GGML_TYPE_F32 && op->type == GGML_TYPE_F32 &&
           ggml_nelements(op) > 0 && w->nb[0] == ggml_type_size(w->type) &&
           w->nb[1] == ggml_row_size(w->type, w->ne[0]) && w->ne[0] == a->ne[0] &&
           w->ne[0] % ggml_blck_size(w->type) == 0 && a->nb[0] == sizeof(float) &&
           a->nb[1] == a->ne[0] * sizeof(float) && ggml_is_contiguous(op) && a->ne[2] % w->ne[2] == 0 &&
           a->ne[3] % w->ne[3] == 0 && op->ne[0] == w->ne[1] && op->ne[1] == a->ne[1] &&
           op->ne[2] == a->ne[2] && op->ne[3] == a->ne[3];
}

struct backend_context {
    const device_context & dev = the_device_context();
    int                    n_threads = (int) std::max(1u, std::thread::hardware_concurrency());
    dispatcher_ptr         dispatcher;  // made for dispatcher_threads, remade when n_threads changes
    int                    dispatcher_threads = 0;
    scope_ptr              scope;

    // What ran, printed at free when TERN_GGML_STATS is set (tests check it).
    uint64_t                        mul_mats[k_n_types] = {};
    uint64_t                        tern_calls          = 0;
    std::mutex                      kernel_runs_mutex;  // the sink may be called from tern's workers
    std::map<std::string, uint64_t> kernel_runs;
    uint64_t                        kernel_nanos = 0;  // summed over the threads

    // Weights wrapped once and kept (see weight_tensor), by the address of their bytes.
    struct cached_weight {
        tensor_ptr            tensor;
        const tern_encoding * encoding;
        size_t                rows, cols;
    };
    std::map<const void *, cached_weight> kept_weights;
};

void count_kernel_run(void * userdata, const tern_event * event) {
    if (event->kind == TERN_EVENT_KERNEL_SELECTED) {
        auto * ctx = static_cast<backend_context *>(userdata);
        std::lock_guard<std::mutex> lock(ctx->kernel_runs_mutex);
        ctx->kernel_runs[event->name]++;
        ctx->kernel_nanos += event->nanos;
    }
}

bool ensure_dispatcher(backend_context & ctx) {
    if (ctx.dispatcher && ctx.dispatcher_threads == ctx.n_threads) {
        return true;
    }
    ctx.dispatcher.reset();
    // The OpenMP executor reads the count through this field, which stays as it is while
    // the dispatcher lives.
    ctx.dispatcher_threads = ctx.n_threads;
    dispatcher_ptr d       = new_dispatcher(ctx.dispatcher_threads, ctx.dev.threads);
    if (!d || !tern_ok(tern_dispatcher_set_sink(d.get(), count_kernel_run, &ctx), "tern_dispatcher_set_sink")) {
        ctx.dispatcher_threads = 0;
        return false;
    }
    ctx.dispatcher = std::move(d);
    return true;
}

// The tern tensor over the n x k weight bytes at `data` (of ggml tensor `w`), or NULL after
// logging why. tern learns things about a tensor's bytes on first use and keeps them with
// the handle (whether every block has the same scale: a pass over the whole weight), so a
// weight is wrapped once per backend when ggml says its buffer holds weights
// (GGML_BACKEND_BUFFER_USAGE_WEIGHTS: loaded once, unchanged while a context uses them);
// anything else is wrapped for this call only, into `call_owned`.
tern_tensor * weight_tensor(backend_context & ctx, const ggml_tensor * w, const void * data, size_t n, size_t k,
                            std::vector<tensor_ptr> & call_owned) {
    const tern_encoding * enc  = ctx.dev.weights[claimed_type_index(w->type)];
    const bool            keep = w->buffer != nullptr &&
                      ggml_backend_buffer_get_usage(w->buffer) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS;
    if (keep) {
        auto it = ctx.kept_weights.find(data);
        const bool same = it != ctx.kept_weights.end() && it->second.encoding == enc && it->second.rows == n &&
                          it->second.cols == k;
        if (same) {
            return it->second.tensor.get();
        }
    }
    tern_tensor * t = nullptr;
    if (!tern_ok(tern_tensor_wrap(enc, data, n * w->nb[1], n, k, &t), "tern_tensor_wrap", w->name)) {
        return nullptr;
    }
    if (keep) {
        ctx.kept_weights[data] = {tensor_ptr(t), enc, n, k};
    } else {
        call_owned.emplace_back(t);
    }
    return t;
}

// Runs `nodes` (MUL_MATs that share src1, or one batched MUL_MAT slice) as one
// tern_matmul_many: the activation is requantized once for all the weights.
// `weights[i]`/`outs[i]` point at the slice of nodes[i] to compute.
bool run_many(backend_context & ctx, const std::vector<const ggml_tensor *> & nodes, const void * act,
              const std::vector<const void *> & weights, const std::vector<float *> & outs) {
    const ggml_tensor * first = nodes[0];
    const size_t        k = (size_t) first->src[1]->ne[0], m = (size_t) first->src[1]->ne[1];
    tern_tensor *       a = nullptr;
    if (!tern_ok(tern_tensor_wrap(ctx.dev.f32, act, m * k * sizeof(float), m, k, &a), "tern_tensor_wrap",
                 first->src[1]->name)) {
        return false;
    }
    tensor_ptr                 a_owner(a);
    std::vector<tensor_ptr>    owners;
    std::vector<tern_tensor *> w_tensors;
    std::vector<size_t>        out_lens;
    for (size_t i = 0; i < nodes.size(); ++i) {
        const ggml_tensor * w = nodes[i]->src[0];
        const size_t        n = (size_t) w->ne[1];
        tern_tensor *       t = weight_tensor(ctx, w, weights[i], n, k, owners);
        if (t == nullptr) {
            return false;
        }
        w_tensors.push_back(t);
        out_lens.push_back(m * n);
    }
    const bool ok = tern_ok(tern_matmul_many(ctx.dispatcher.get(), a, w_tensors.data(), w_tensors.size(),
                                             ctx.scope.get(), outs.data(), out_lens.data()),
                            "tern_matmul_many", first->name);
    if (ok) {
        ctx.tern_calls++;
    }
    return tern_ok(tern_scope_reset(ctx.scope.get()), "tern_scope_reset", first->name) && ok;
}

// One MUL_MAT with batch dims: each (i2, i3) slice of the activation against the weight
// slice ggml's broadcast maps it to.
bool compute_batched(backend_context & ctx, const ggml_tensor * node) {
    const ggml_tensor * w  = node->src[0];
    const ggml_tensor * a  = node->src[1];
    const int64_t       r2 = a->ne[2] / w->ne[2], r3 = a->ne[3] / w->ne[3];
    for (int64_t i3 = 0; i3 < a->ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < a->ne[2]; ++i2) {
            const char * w_data = (const char *) w->data + (i2 / r2) * w->nb[2] + (i3 / r3) * w->nb[3];
            const char * a_data = (const char *) a->data + i2 * a->nb[2] + i3 * a->nb[3];
            float *      out    = (float *) ((char *) node->data + i2 * node->nb[2] + i3 * node->nb[3]);
            if (!run_many(ctx, {node}, a_data, {w_data}, {out})) {
                return false;
            }
        }
    }
    return true;
}

// The run of MUL_MATs from graph node `first` on that share its activation (Q/K/V,
// gate/up; all unbatched): one tern call for all of them. A node seen again ends the run
// (a graph may list one node several times, as test-backend-ops' perf mode does; one call
// must not write an output twice). Returns the index after the run, or -1 on failure.
int compute_shared_activation_run(backend_context & ctx, ggml_cgraph * graph, int first) {
    const ggml_tensor *              act = ggml_graph_node(graph, first)->src[1];
    std::vector<const ggml_tensor *> nodes;
    std::vector<const void *>        weights;
    std::vector<float *>             outs;
    int                              end = first;
    for (; end < ggml_graph_n_nodes(graph); ++end) {
        const ggml_tensor * node = ggml_graph_node(graph, end);
        if (node->op != GGML_OP_MUL_MAT || node->src[1] != act || (node->flags & GGML_TENSOR_FLAG_COMPUTE) == 0 ||
            std::find(nodes.begin(), nodes.end(), node) != nodes.end()) {
            break;
        }
        nodes.push_back(node);
        weights.push_back(node->src[0]->data);
        outs.push_back((float *) node->data);
    }
    return run_many(ctx, nodes, act->data, weights, outs) ? end : -1;
}

// The view ops compute nothing (graph_compute skips them); claiming them is what lets a
// graph of views around a ternary MUL_MAT, and test-backend-ops (which asks about every
// tensor of a case, leaves included), stay on this backend.
bool is_view_op(ggml_op op) {
    return op == GGML_OP_NONE || op == GGML_OP_RESHAPE || op == GGML_OP_VIEW || op == GGML_OP_PERMUTE ||
           op == GGML_OP_TRANSPOSE;
}

ggml_status graph_compute(ggml_backend_t backend, ggml_cgraph * graph) {
    backend_context & ctx = *static_cast<backend_context *>(backend->context);
    if (!ensure_dispatcher(ctx)) {
        return GGML_STATUS_FAILED;
    }
    for (int i = 0; i < ggml_graph_n_nodes(graph);) {
        ggml_tensor * node = ggml_graph_node(graph, i);
        if ((node->flags & GGML_TENSOR_FLAG_COMPUTE) == 0 || ggml_is_empty(node) || is_view_op(node->op)) {
            ++i;
            continue;
        }
        if (node->op != GGML_OP_MUL_MAT) {
            // supports_op claims nothing else, so the scheduler never sends it.
            GGML_LOG_ERROR("ggml-tern: %s (%s) is not an op this backend claims\n", ggml_op_desc(node), node->name);
            return GGML_STATUS_FAILED;
        }
        int next = i + 1;
        if (node->src[1]->ne[2] == 1 && node->src[1]->ne[3] == 1) {
            next = compute_shared_activation_run(ctx, graph, i);
        } else if (!compute_batched(ctx, node)) {
            next = -1;
        }
        if (next < 0) {
            return GGML_STATUS_FAILED;
        }
        for (; i < next; ++i) {
            ctx.mul_mats[claimed_type_index(ggml_graph_node(graph, i)->src[0]->type)]++;
        }
    }
    return GGML_STATUS_SUCCESS;
}

void print_stats(backend_context & ctx) {
    std::string line = "ggml-tern stats:";
    for (size_t i = 0; i < k_n_types; ++i) {
        line += std::string(" ") + ggml_type_name(k_ternary_types[i].type) + "=" + std::to_string(ctx.mul_mats[i]);
    }
    line += " tern_calls=" + std::to_string(ctx.tern_calls) + " kernels:";
    for (const auto & run : ctx.kernel_runs) {
        line += " " + run.first + "=" + std::to_string(run.second);
    }
    line += " kernel_ms=" + std::to_string(ctx.kernel_nanos / 1000000) + " threads=" + std::to_string(ctx.n_threads) +
            (ctx.dev.threads == executor::ggml_openmp ? "/openmp" : "/tern");
    fprintf(stderr, "%s\n", line.c_str());
}

const char * backend_get_name(ggml_backend_t) {
    return "tern";
}

void backend_free(ggml_backend_t backend) {
    auto * ctx = static_cast<backend_context *>(backend->context);
    if (getenv("TERN_GGML_STATS") != nullptr) {
        print_stats(*ctx);
    }
    delete ctx;
    delete backend;
}

const ggml_backend_i k_backend_interface = {
    /* .get_name            = */ backend_get_name,
    /* .free                = */ backend_free,
    /* .set_tensor_async    = */ nullptr,
    /* .get_tensor_async    = */ nullptr,
    /* .set_tensor_2d_async = */ nullptr,
    /* .get_tensor_2d_async = */ nullptr,
    /* .cpy_tensor_async    = */ nullptr,
    /* .synchronize         = */ nullptr,
    /* .graph_plan_create   = */ nullptr,
    /* .graph_plan_free     = */ nullptr,
    /* .graph_plan_update   = */ nullptr,
    /* .graph_plan_compute  = */ nullptr,
    /* .graph_compute       = */ graph_compute,
    /* .event_record        = */ nullptr,
    /* .event_wait          = */ nullptr,
    /* .graph_optimize      = */ nullptr,
};

ggml_guid_t backend_guid() {
    static ggml_guid guid = {0x74, 0x65, 0x72, 0x6e, 0x2d, 0x67, 0x67, 0x6d,
                             0x6c, 0x2d, 0x62, 0x61, 0x63, 0x6b, 0x65, 0x6e};  // "tern-ggml-backen"
    return &guid;
}

void set_n_threads(ggml_backend_t backend, int n_threads) {
    GGML_ASSERT(ggml_guid_matches(backend->guid, backend_guid()));
    static_cast<backend_context *>(backend->context)->n_threads = n_threads;
}

const char * device_get_name(ggml_backend_dev_t) {
    return "tern";
}

const char * device_get_description(ggml_backend_dev_t) {
    return the_device_context().description.c_str();
}

void device_get_memory(ggml_backend_dev_t, size_t * free, size_t * total) {
    // Host memory, owned by the CPU backend's buffers: nothing of its own to report.
    *free  = 0;
    *total = 0;
}

enum ggml_backend_dev_type device_get_type(ggml_backend_dev_t) {
    return GGML_BACKEND_DEVICE_TYPE_ACCEL;
}

void device_get_props(ggml_backend_dev_t dev, ggml_backend_dev_props * props) {
    props->name        = device_get_name(dev);
    props->description = device_get_description(dev);
    props->type        = device_get_type(dev);
    device_get_memory(dev, &props->memory_free, &props->memory_total);
    props->caps = {
        /* .async                = */ false,
        /* .host_buffer          = */ false,
        /* .buffer_from_host_ptr = */ true,
        /* .events               = */ false,
        /* .mmap_support         = */ true,
    };
}

ggml_backend_t device_init_backend(ggml_backend_dev_t, const char *) {
    return ggml_backend_tern_init();
}

ggml_backend_buffer_type_t device_get_buffer_type(ggml_backend_dev_t) {
    return ggml_backend_cpu_buffer_type();
}

ggml_backend_buffer_t device_buffer_from_host_ptr(ggml_backend_dev_t, void * ptr, size_t size, size_t) {
    return ggml_backend_cpu_buffer_from_ptr(ptr, size);
}

bool device_supports_op(ggml_backend_dev_t, const ggml_tensor * op) {
    return is_view_op(op->op) || (op->op == GGML_OP_MUL_MAT && supports_mul_mat(op));
}

bool device_supports_buft(ggml_backend_dev_t, ggml_backend_buffer_type_t buft) {
    return ggml_backend_buft_is_host(buft);
}

const ggml_backend_device_i k_device_interface = {
    /* .get_name             = */ device_get_name,
    /* .get_description      = */ device_get_description,
    /* .get_memory           = */ device_get_memory,
    /* .get_type             = */ device_get_type,
    /* .get_props            = */ device_get_props,
    /* .init_backend         = */ device_init_backend,
    /* .get_buffer_type      = */ device_get_buffer_type,
    /* .get_host_buffer_type = */ nullptr,
    /* .buffer_from_host_ptr = */ device_buffer_from_host_ptr,
    /* .supports_op          = */ device_supports_op,
    /* .supports_buft        = */ device_supports_buft,
    /* .offload_op           = */ nullptr,
    /* .event_new            = */ nullptr,
    /* .event_free           = */ nullptr,
    /* .event_synchronize    = */ nullptr,
};

const char * reg_get_name(ggml_backend_reg_t) {
    return "tern";
}

size_t reg_get_device_count(ggml_backend_reg_t) {
    return 1;
}

ggml_backend_dev_t reg_get_device(ggml_backend_reg_t reg, size_t index) {
    GGML_ASSERT(index == 0);
    static ggml_backend_device device = {k_device_interface, reg, nullptr};
    return &device;
}

void * reg_get_proc_address(ggml_backend_reg_t, const char * name) {
    if (std::strcmp(name, "ggml_backend_set_n_threads") == 0) {
        return (void *) set_n_threads;
    }
    return nullptr;
}

const ggml_backend_reg_i k_reg_interface = {
    /* .get_name         = */ reg_get_name,
    /* .get_device_count = */ reg_get_device_count,
    /* .get_device       = */ reg_get_device,
    /* .get_proc_address = */ reg_get_proc_address,
};

// ggml's backend structs and ggml_tensor carry no version of their own besides
// GGML_BACKEND_API_VERSION, which does not change with every layout change: only the
// ggml the headers came from is known to match.
bool ggml_version_matches() {
    if (std::strcmp(ggml_version(), TERN_GGML_VERSION) == 0) {
        return true;
    }
    GGML_LOG_ERROR("ggml-tern: built against ggml %s, running with ggml %s: not loading (rebuild with "
                   "TERN_GGML_SOURCE_DIR pointing at this ggml's source)\n",
                   TERN_GGML_VERSION, ggml_version());
    return false;
}

}  // namespace

ggml_backend_reg_t ggml_backend_tern_reg(void) {
    static ggml_backend_reg reg = {GGML_BACKEND_API_VERSION, k_reg_interface, nullptr};
    static const bool       usable = ggml_version_matches();
    return usable ? &reg : nullptr;
}

ggml_backend_t ggml_backend_tern_init(void) {
    ggml_backend_reg_t reg = ggml_backend_tern_reg();
    if (reg == nullptr) {
        return nullptr;
    }
    auto *       ctx   = new backend_context;
    tern_scope * scope = nullptr;
    if (!tern_ok(tern_scope_new(0, &scope), "tern_scope_new")) {
        delete ctx;
        return nullptr;
    }
    ctx->scope.reset(scope);
    return new ggml_backend{backend_guid(), k_backend_interface, ggml_backend_reg_dev_get(reg, 0), ctx};
}

GGML_BACKEND_DL_IMPL(ggml_backend_tern_reg)
