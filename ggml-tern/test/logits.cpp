// One forward pass of a model through llama.cpp, its logits written out as raw f32
// (n_tokens x n_vocab, row-major) for scripts/test-ggml.sh to compare between runs with
// and without libggml-tern (GGML_BACKEND_PATH). The tokens are a fixed pseudo-random
// sequence, so every run sees the same input.
//
//   logits MODEL N_TOKENS N_THREADS OUT [REPEAT]
//
// REPEAT (default 1) loads the model, makes a context and runs the pass that many times,
// freeing everything each time (the leak check runs this under valgrind).
#include "llama.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

static bool forward_pass(const char * path, int n_tokens, int n_threads, std::vector<float> & logits, int & n_vocab) {
    llama_model_params mparams = llama_model_default_params();
    llama_model *      model   = llama_model_load_from_file(path, mparams);
    if (model == nullptr) {
        fprintf(stderr, "logits: cannot load %s\n", path);
        return false;
    }
    llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx                = (uint32_t) n_tokens;
    cparams.n_batch              = (uint32_t) n_tokens;
    cparams.n_ubatch             = (uint32_t) n_tokens;
    cparams.n_threads            = n_threads;
    cparams.n_threads_batch      = n_threads;
    llama_context * ctx          = llama_init_from_model(model, cparams);
    bool            ok           = ctx != nullptr;
    if (ok) {
        n_vocab           = llama_vocab_n_tokens(llama_model_get_vocab(model));
        llama_batch batch = llama_batch_init(n_tokens, 0, 1);
        uint32_t    state = 12345;
        for (int i = 0; i < n_tokens; ++i) {
            state                = state * 1664525u + 1013904223u;
            batch.token[i]       = (llama_token) ((state >> 8) % (uint32_t) n_vocab);
            batch.pos[i]         = i;
            batch.n_seq_id[i]    = 1;
            batch.seq_id[i][0]   = 0;
            batch.logits[i]      = 1;
        }
        batch.n_tokens = n_tokens;
        ok             = llama_decode(ctx, batch) == 0;
        if (ok) {
            logits.resize((size_t) n_tokens * (size_t) n_vocab);
            for (int i = 0; i < n_tokens; ++i) {
                const float * row = llama_get_logits_ith(ctx, i);
                std::copy(row, row + n_vocab, logits.begin() + (size_t) i * (size_t) n_vocab);
            }
        } else {
            fprintf(stderr, "logits: llama_decode failed\n");
        }
        llama_batch_free(batch);
        llama_free(ctx);
    } else {
        fprintf(stderr, "logits: cannot create a context\n");
    }
    llama_model_free(model);
    return ok;
}

int main(int argc, char ** argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s MODEL N_TOKENS N_THREADS OUT [REPEAT]\n", argv[0]);
        return 2;
    }
    const int n_tokens  = atoi(argv[2]);
    const int n_threads = atoi(argv[3]);
    const int repeat    = argc == 6 ? atoi(argv[5]) : 1;
    if (n_tokens < 1 || n_threads < 1 || repeat < 1) {
        fprintf(stderr, "logits: N_TOKENS, N_THREADS and REPEAT must be positive\n");
        return 2;
    }
    ggml_backend_load_all();  // the CPU backend, and GGML_BACKEND_PATH's when it is set
    llama_backend_init();
    std::vector<float> logits;
    int                n_vocab = 0;
    bool               ok      = true;
    for (int r = 0; r < repeat && ok; ++r) {
        ok = forward_pass(argv[1], n_tokens, n_threads, logits, n_vocab);
    }
    llama_backend_free();
    if (!ok) {
        return 1;
    }
    FILE * out     = fopen(argv[4], "wb");
    bool   written = out != nullptr && fwrite(logits.data(), sizeof(float), logits.size(), out) == logits.size();
    if (out != nullptr && fclose(out) != 0) {
        written = false;
    }
    if (!written) {
        fprintf(stderr, "logits: cannot write %s\n", argv[4]);
        return 1;
    }
    printf("logits: %d tokens x %d vocab -> %s\n", n_tokens, n_vocab, argv[4]);
    return 0;
}
