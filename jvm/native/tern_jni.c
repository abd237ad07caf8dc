/*
 * libtern_jni: the JNI bridge of the tern JVM library (tern.JniBridge, jvm/src/tern/JniBridge.kt)
 * for JDK 17/21 and Android. Each function passes one tern.h call through: pointers travel
 * as jlong, out-values go to a jlongArray on success only, and the tern_status is returned,
 * so all checks and messages stay in tern and in the shared Kotlin layer.
 *
 * JVM arrays are copied (Get/Release<T>ArrayElements), never pinned with the Critical
 * functions: tern may call the event sink back into the JVM during a matmul, which a
 * critical region forbids. An output array is copied back only on success (JNI_ABORT
 * otherwise), so a failed call leaves it untouched. Array parameters are never NULL unless
 * their Kotlin declaration is nullable (those are checked here).
 */
#include <jni.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tern.h"

#define PTR(x) ((void *)(intptr_t)(x))
#define JPTR(p) ((jlong)(intptr_t)(p))

static JavaVM *tern_vm;
/* tern.EventSink.onEvent(kind, name, from, to, rows, cols, bytes, nanos) */
static jmethodID tern_on_event;

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved) {
    (void)reserved;
    JNIEnv *env;
    if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_8) != JNI_OK) return JNI_ERR;
    jclass sink = (*env)->FindClass(env, "tern/EventSink");
    if (sink == NULL) return JNI_ERR;
    tern_on_event = (*env)->GetMethodID(env, sink, "onEvent", "(IJIIJJJJ)V");
    (*env)->DeleteLocalRef(env, sink);
    if (tern_on_event == NULL) return JNI_ERR;
    tern_vm = vm;
    return JNI_VERSION_1_8;
}

/* Writes `n` values to `out` (which the Kotlin side sized) if the call succeeded. */
static jint put(JNIEnv *env, jlongArray out, tern_status status, jsize n, const jlong *values) {
    if (status == TERN_OK) (*env)->SetLongArrayRegion(env, out, 0, n, values);
    return (jint)status;
}

static jint put1(JNIEnv *env, jlongArray out, tern_status status, jlong value) {
    return put(env, out, status, 1, &value);
}

/* Elements of a JVM float array (a copy), or NULL with a pending OutOfMemoryError. */
static jfloat *floats_in(JNIEnv *env, jfloatArray array) {
    return (*env)->GetFloatArrayElements(env, array, NULL);
}

/* Releases a copy from floats_in, copying it back to the array only if `status` is TERN_OK. */
static void floats_out(JNIEnv *env, jfloatArray array, jfloat *elems, tern_status status) {
    (*env)->ReleaseFloatArrayElements(env, array, elems, status == TERN_OK ? 0 : JNI_ABORT);
}

/* A NUL-terminated copy of a byte array the Kotlin side terminated (cString), or NULL. */
static jbyte *bytes_in(JNIEnv *env, jbyteArray array) {
    return array == NULL ? NULL : (*env)->GetByteArrayElements(env, array, NULL);
}

static void bytes_done(JNIEnv *env, jbyteArray array, jbyte *elems) {
    if (elems != NULL) (*env)->ReleaseByteArrayElements(env, array, elems, JNI_ABORT);
}

#define JNI_FN(ret, name) JNIEXPORT ret JNICALL Java_tern_JniBridge_##name

JNI_FN(jint, version)(JNIEnv *env, jobject self) {
    (void)env, (void)self;
    return (jint)tern_version();
}

JNI_FN(jlong, versionString)(JNIEnv *env, jobject self) {
    (void)env, (void)self;
    return JPTR(tern_version_string());
}

JNI_FN(jlong, statusString)(JNIEnv *env, jobject self, jint status) {
    (void)env, (void)self;
    return JPTR(tern_status_str((tern_status)status));
}

JNI_FN(jlong, lastError)(JNIEnv *env, jobject self) {
    (void)env, (void)self;
    return JPTR(tern_last_error());
}

/* The bytes of a NUL-terminated string tern returned (never NULL: tern's strings never are). */
JNI_FN(jbyteArray, cString)(JNIEnv *env, jobject self, jlong address) {
    (void)self;
    const char *s = PTR(address);
    size_t len = s == NULL ? 0 : strlen(s);
    jbyteArray array = (*env)->NewByteArray(env, (jsize)len);
    if (array != NULL && len > 0) (*env)->SetByteArrayRegion(env, array, 0, (jsize)len, (const jbyte *)s);
    return array;
}

JNI_FN(jbyteArray, copyBytes)(JNIEnv *env, jobject self, jlong address, jlong length) {
    (void)self;
    jbyteArray array = (*env)->NewByteArray(env, (jsize)length);
    if (array != NULL && length > 0) (*env)->SetByteArrayRegion(env, array, 0, (jsize)length, PTR(address));
    return array;
}

JNI_FN(jlong, directAddress)(JNIEnv *env, jobject self, jobject buffer) {
    (void)self;
    return JPTR((*env)->GetDirectBufferAddress(env, buffer));
}

JNI_FN(jobject, directBuffer)(JNIEnv *env, jobject self, jlong address, jlong length) {
    (void)self;
    return (*env)->NewDirectByteBuffer(env, PTR(address), length);
}

JNI_FN(jlong, kernelCount)(JNIEnv *env, jobject self) {
    (void)env, (void)self;
    return (jlong)tern_kernel_count();
}

JNI_FN(jint, kernelInfo)(JNIEnv *env, jobject self, jlong index, jlongArray out) {
    (void)self;
    tern_kernel_info info;
    memset(&info, 0, sizeof info);
    tern_status s = tern_kernel_info_get((size_t)index, &info);
    jlong v[4] = {JPTR(info.name), info.weight, info.act, info.available};
    return put(env, out, s, 4, v);
}

JNI_FN(jint, encoding)(JNIEnv *env, jobject self, jint format, jlongArray out) {
    (void)self;
    const tern_encoding *enc = NULL;
    tern_status s = tern_encoding_get((uint32_t)format, &enc);
    return put1(env, out, s, JPTR(enc));
}

JNI_FN(jlong, encodingName)(JNIEnv *env, jobject self, jlong enc) {
    (void)env, (void)self;
    return JPTR(tern_encoding_name(PTR(enc)));
}

JNI_FN(jint, bytesFor)(JNIEnv *env, jobject self, jlong enc, jlong rows, jlong cols, jlongArray out) {
    (void)self;
    size_t bytes = 0;
    tern_status s = tern_encoding_bytes_for(PTR(enc), (size_t)rows, (size_t)cols, &bytes);
    return put1(env, out, s, (jlong)bytes);
}

JNI_FN(jint, tensorWrap)(JNIEnv *env, jobject self, jlong enc, jlong data, jlong len, jlong rows, jlong cols,
                         jlongArray out) {
    (void)self;
    tern_tensor *t = NULL;
    tern_status s = tern_tensor_wrap(PTR(enc), PTR(data), (size_t)len, (size_t)rows, (size_t)cols, &t);
    return put1(env, out, s, JPTR(t));
}

JNI_FN(jint, tensorEncode)(JNIEnv *env, jobject self, jlong enc, jfloatArray src, jlong rows, jlong cols,
                           jlongArray out) {
    (void)self;
    jfloat *elems = floats_in(env, src);
    if (elems == NULL) return TERN_ERR_ALLOCATION_FAILED;
    tern_tensor *t = NULL;
    size_t len = (size_t)(*env)->GetArrayLength(env, src);
    tern_status s = tern_tensor_encode(PTR(enc), elems, len, (size_t)rows, (size_t)cols, &t);
    (*env)->ReleaseFloatArrayElements(env, src, elems, JNI_ABORT);
    return put1(env, out, s, JPTR(t));
}

JNI_FN(jint, tensorDecode)(JNIEnv *env, jobject self, jlong t, jfloatArray dst, jlong dst_address, jlong dst_len) {
    (void)self;
    if (dst == NULL) return (jint)tern_tensor_decode(PTR(t), PTR(dst_address), (size_t)dst_len);
    jfloat *elems = floats_in(env, dst);
    if (elems == NULL) return TERN_ERR_ALLOCATION_FAILED;
    tern_status s = tern_tensor_decode(PTR(t), elems, (size_t)(*env)->GetArrayLength(env, dst));
    floats_out(env, dst, elems, s);
    return (jint)s;
}

JNI_FN(jint, tensorGet)(JNIEnv *env, jobject self, jlong t, jlong row, jlong col, jfloatArray out) {
    (void)self;
    float value = 0;
    tern_status s = tern_tensor_get(PTR(t), (size_t)row, (size_t)col, &value);
    if (s == TERN_OK) (*env)->SetFloatArrayRegion(env, out, 0, 1, &value);
    return (jint)s;
}

JNI_FN(jint, tensorValidate)(JNIEnv *env, jobject self, jlong t) {
    (void)env, (void)self;
    return (jint)tern_tensor_validate(PTR(t));
}

JNI_FN(jint, tensorData)(JNIEnv *env, jobject self, jlong t, jlongArray out) {
    (void)self;
    const void *data = NULL;
    size_t len = 0;
    tern_status s = tern_tensor_data(PTR(t), &data, &len);
    jlong v[2] = {JPTR(data), (jlong)len};
    return put(env, out, s, 2, v);
}

JNI_FN(jint, transcode)(JNIEnv *env, jobject self, jlong from, jlong src, jlong src_len, jlong rows, jlong cols,
                        jlong to, jlong dst, jlong dst_len) {
    (void)env, (void)self;
    return (jint)tern_transcode(PTR(from), PTR(src), (size_t)src_len, (size_t)rows, (size_t)cols, PTR(to), PTR(dst),
                                (size_t)dst_len);
}

JNI_FN(void, tensorShape)(JNIEnv *env, jobject self, jlong t, jlongArray out) {
    (void)self;
    jlong v[3] = {tern_tensor_format(PTR(t)), (jlong)tern_tensor_rows(PTR(t)), (jlong)tern_tensor_cols(PTR(t))};
    (*env)->SetLongArrayRegion(env, out, 0, 3, v);
}

JNI_FN(void, tensorFree)(JNIEnv *env, jobject self, jlong t) {
    (void)env, (void)self;
    tern_tensor_free(PTR(t));
}

JNI_FN(jint, scopeNew)(JNIEnv *env, jobject self, jlong initial_bytes, jlongArray out) {
    (void)self;
    tern_scope *scope = NULL;
    tern_status s = tern_scope_new((size_t)initial_bytes, &scope);
    return put1(env, out, s, JPTR(scope));
}

JNI_FN(jint, scopeReset)(JNIEnv *env, jobject self, jlong scope) {
    (void)env, (void)self;
    return (jint)tern_scope_reset(PTR(scope));
}

JNI_FN(jint, scopeStats)(JNIEnv *env, jobject self, jlong scope, jlongArray out) {
    (void)self;
    tern_scope_stats st;
    memset(&st, 0, sizeof st);
    tern_status s = tern_scope_get_stats(PTR(scope), &st);
    jlong v[5] = {(jlong)st.bytes_in_use, (jlong)st.high_water, (jlong)st.allocations, (jlong)st.capacity,
                  (jlong)st.generation};
    return put(env, out, s, 5, v);
}

JNI_FN(void, scopeFree)(JNIEnv *env, jobject self, jlong scope) {
    (void)env, (void)self;
    tern_scope_free(PTR(scope));
}

JNI_FN(jint, requantize)(JNIEnv *env, jobject self, jlong t, jlong scope, jlongArray out) {
    (void)self;
    tern_tensor *q = NULL;
    tern_status s = tern_requantize_i8_absmax(PTR(t), PTR(scope), NULL, NULL, &q);
    return put1(env, out, s, JPTR(q));
}

JNI_FN(jint, dispatcherNew)(JNIEnv *env, jobject self, jint threads, jbyteArray kernel, jint flags, jlongArray out) {
    (void)self;
    tern_dispatcher_options options;
    memset(&options, 0, sizeof options);
    options.struct_size = sizeof options;
    options.n_threads = (uint32_t)threads;
    options.flags = (uint32_t)flags;
    jbyte *name = bytes_in(env, kernel);
    if (kernel != NULL && name == NULL) return TERN_ERR_ALLOCATION_FAILED;
    options.kernel = (const char *)name;
    tern_dispatcher *d = NULL;
    tern_status s = tern_dispatcher_new(&options, &d);
    bytes_done(env, kernel, name);
    return put1(env, out, s, JPTR(d));
}

/* tern_event_fn: forwards to the EventSink whose global reference is `userdata`. tern calls
 * it on the thread that called matmul, a JVM thread, so GetEnv finds it attached. */
static void on_event(void *userdata, const tern_event *e) {
    JNIEnv *env;
    if (userdata == NULL || e == NULL) return;
    if ((*tern_vm)->GetEnv(tern_vm, (void **)&env, JNI_VERSION_1_8) != JNI_OK) return;
    /* The Kotlin sink catches its callback's exceptions; this only guards against a pending one. */
    if ((*env)->ExceptionCheck(env)) return;
    (*env)->CallVoidMethod(env, (jobject)userdata, tern_on_event, (jint)e->kind, JPTR(e->name), (jint)e->from,
                           (jint)e->to, (jlong)e->rows, (jlong)e->cols, (jlong)e->bytes, (jlong)e->nanos);
}

JNI_FN(jint, setSinkRef)(JNIEnv *env, jobject self, jlong d, jobject sink, jlongArray out) {
    (void)self;
    if (sink == NULL) return put1(env, out, tern_dispatcher_set_sink(PTR(d), NULL, NULL), 0);
    jobject ref = (*env)->NewGlobalRef(env, sink);
    if (ref == NULL) return TERN_ERR_ALLOCATION_FAILED;
    tern_status s = tern_dispatcher_set_sink(PTR(d), on_event, ref);
    if (s != TERN_OK) (*env)->DeleteGlobalRef(env, ref);
    return put1(env, out, s, JPTR(ref));
}

JNI_FN(void, deleteGlobalRef)(JNIEnv *env, jobject self, jlong ref) {
    (void)self;
    if (ref != 0) (*env)->DeleteGlobalRef(env, (jobject)PTR(ref));
}

JNI_FN(void, dispatcherFree)(JNIEnv *env, jobject self, jlong d) {
    (void)env, (void)self;
    tern_dispatcher_free(PTR(d));
}

JNI_FN(jint, matmul)(JNIEnv *env, jobject self, jlong d, jlong act, jlong weight, jlong scope, jfloatArray out,
                     jlong out_address, jlong out_len, jboolean upcalls) {
    (void)self, (void)upcalls;
    if (out == NULL) {
        return (jint)tern_matmul(PTR(d), PTR(act), PTR(weight), PTR(scope), PTR(out_address), (size_t)out_len);
    }
    jfloat *elems = floats_in(env, out);
    if (elems == NULL) return TERN_ERR_ALLOCATION_FAILED;
    tern_status s = tern_matmul(PTR(d), PTR(act), PTR(weight), PTR(scope), elems,
                                (size_t)(*env)->GetArrayLength(env, out));
    floats_out(env, out, elems, s);
    return (jint)s;
}

JNI_FN(jint, matmulMany)(JNIEnv *env, jobject self, jlong d, jlong act, jlongArray weights, jlong scope,
                         jobjectArray outs, jlongArray out_addresses, jlongArray out_lens) {
    (void)self;
    jsize n = (*env)->GetArrayLength(env, weights);
    if (n <= 0) {
        /* Non-NULL empty tables, so that tern reports the count (TERN_ERR_INVALID_ARGUMENT). */
        const tern_tensor *no_weight = NULL;
        float *no_out = NULL;
        size_t no_len = 0;
        return (jint)tern_matmul_many(PTR(d), PTR(act), &no_weight, 0, PTR(scope), &no_out, &no_len);
    }
    size_t count = (size_t)n;
    const tern_tensor **w = calloc(count, sizeof *w);
    float **o = calloc(count, sizeof *o);
    size_t *lens = calloc(count, sizeof *lens);
    jfloatArray *arrays = calloc(count, sizeof *arrays);
    jlong *values = calloc(count, sizeof *values);
    tern_status s = TERN_ERR_ALLOCATION_FAILED;
    jsize copied = 0;
    if (w == NULL || o == NULL || lens == NULL || arrays == NULL || values == NULL) goto done;
    (*env)->GetLongArrayRegion(env, weights, 0, n, values);
    for (size_t i = 0; i < count; i++) w[i] = PTR(values[i]);
    (*env)->GetLongArrayRegion(env, out_lens, 0, n, values);
    for (size_t i = 0; i < count; i++) lens[i] = (size_t)values[i];
    if (outs == NULL) {
        (*env)->GetLongArrayRegion(env, out_addresses, 0, n, values);
        for (size_t i = 0; i < count; i++) o[i] = PTR(values[i]);
    } else {
        for (; copied < n; copied++) {
            arrays[copied] = (*env)->GetObjectArrayElement(env, outs, copied);
            o[copied] = arrays[copied] == NULL ? NULL : floats_in(env, arrays[copied]);
            if (arrays[copied] != NULL && o[copied] == NULL) goto done;
        }
    }
    s = tern_matmul_many(PTR(d), PTR(act), w, count, PTR(scope), o, lens);
done:
    for (jsize i = 0; i < copied; i++) {
        if (o[i] != NULL) floats_out(env, arrays[i], o[i], s);
        (*env)->DeleteLocalRef(env, arrays[i]);
    }
    free(w), free(o), free(lens), free(arrays), free(values);
    return (jint)s;
}

JNI_FN(jint, ggufOpen)(JNIEnv *env, jobject self, jbyteArray path, jlongArray out) {
    (void)self;
    jbyte *p = bytes_in(env, path);
    if (p == NULL) return TERN_ERR_ALLOCATION_FAILED;
    tern_gguf *g = NULL;
    tern_status s = tern_gguf_open((const char *)p, &g);
    bytes_done(env, path, p);
    return put1(env, out, s, JPTR(g));
}

JNI_FN(jint, ggufOpenBytes)(JNIEnv *env, jobject self, jlong address, jlong len, jlongArray out) {
    (void)self;
    tern_gguf *g = NULL;
    tern_status s = tern_gguf_open_bytes(PTR(address), (size_t)len, &g);
    return put1(env, out, s, JPTR(g));
}

JNI_FN(jlong, ggufCount)(JNIEnv *env, jobject self, jlong g) {
    (void)env, (void)self;
    return (jlong)tern_gguf_tensor_count(PTR(g));
}

JNI_FN(jint, ggufInfo)(JNIEnv *env, jobject self, jlong g, jlong index, jlongArray out) {
    (void)self;
    tern_gguf_tensor_info info;
    memset(&info, 0, sizeof info);
    tern_status s = tern_gguf_tensor_info_get(PTR(g), (size_t)index, &info);
    jlong v[10] = {JPTR(info.name), info.ggml_type, info.format, info.n_dims,
                   (jlong)info.ne[0], (jlong)info.ne[1], (jlong)info.ne[2], (jlong)info.ne[3],
                   (jlong)info.offset, (jlong)info.bytes};
    return put(env, out, s, 10, v);
}

/* tern_gguf_find or tern_gguf_kv_find: the index of a tensor or metadata entry by name. */
static jint find_index(JNIEnv *env, jlong g, jbyteArray name, jlongArray out,
                       tern_status (*find)(const tern_gguf *, const char *, size_t *)) {
    jbyte *n = bytes_in(env, name);
    if (n == NULL) return TERN_ERR_ALLOCATION_FAILED;
    size_t index = 0;
    tern_status s = find(PTR(g), (const char *)n, &index);
    bytes_done(env, name, n);
    return put1(env, out, s, (jlong)index);
}

JNI_FN(jint, ggufFind)(JNIEnv *env, jobject self, jlong g, jbyteArray name, jlongArray out) {
    (void)self;
    return find_index(env, g, name, out, tern_gguf_find);
}

JNI_FN(jint, ggufWrap)(JNIEnv *env, jobject self, jlong g, jlong index, jlongArray out) {
    (void)self;
    tern_tensor *t = NULL;
    tern_status s = tern_gguf_tensor_wrap(PTR(g), (size_t)index, &t);
    return put1(env, out, s, JPTR(t));
}

JNI_FN(void, ggufFree)(JNIEnv *env, jobject self, jlong g) {
    (void)env, (void)self;
    tern_gguf_free(PTR(g));
}

JNI_FN(jint, ggufWrapSlice)(JNIEnv *env, jobject self, jlong g, jlong index, jlong slice, jlongArray out) {
    (void)self;
    tern_tensor *t = NULL;
    tern_status s = tern_gguf_tensor_wrap_slice(PTR(g), (size_t)index, (size_t)slice, &t);
    return put1(env, out, s, JPTR(t));
}

JNI_FN(jint, ggufTensorData)(JNIEnv *env, jobject self, jlong g, jlong index, jlongArray out) {
    (void)self;
    const void *data = NULL;
    size_t len = 0;
    uint32_t type = 0;
    tern_status s = tern_gguf_tensor_data(PTR(g), (size_t)index, &data, &len, &type);
    jlong v[3] = {JPTR(data), (jlong)len, type};
    return put(env, out, s, 3, v);
}

JNI_FN(jlong, ggufKvCount)(JNIEnv *env, jobject self, jlong g) {
    (void)env, (void)self;
    return (jlong)tern_gguf_kv_count(PTR(g));
}

JNI_FN(jint, ggufKvFind)(JNIEnv *env, jobject self, jlong g, jbyteArray key, jlongArray out) {
    (void)self;
    return find_index(env, g, key, out, tern_gguf_kv_find);
}

JNI_FN(jint, ggufKvKey)(JNIEnv *env, jobject self, jlong g, jlong index, jlongArray out) {
    (void)self;
    const char *key = NULL;
    size_t len = 0;
    tern_status s = tern_gguf_kv_key(PTR(g), (size_t)index, &key, &len);
    jlong v[2] = {JPTR(key), (jlong)len};
    return put(env, out, s, 2, v);
}

JNI_FN(jint, ggufKvType)(JNIEnv *env, jobject self, jlong g, jlong index, jlongArray out) {
    (void)self;
    uint32_t type = 0;
    tern_status s = tern_gguf_kv_type(PTR(g), (size_t)index, &type);
    return put1(env, out, s, type);
}

JNI_FN(jint, ggufKvArrayLen)(JNIEnv *env, jobject self, jlong g, jlong index, jlongArray out) {
    (void)self;
    uint32_t type = 0;
    size_t len = 0;
    tern_status s = tern_gguf_kv_array_len(PTR(g), (size_t)index, &type, &len);
    jlong v[2] = {type, (jlong)len};
    return put(env, out, s, 2, v);
}

/* The scalar GGUF types: (TERN_GGUF_TYPE_ suffix, getter suffix, union member, C type). */
#define GGUF_SCALARS(X)                                                                         \
    X(UINT8, u8, u8, uint8_t) X(INT8, i8, i8, int8_t) X(UINT16, u16, u16, uint16_t)             \
    X(INT16, i16, i16, int16_t) X(UINT32, u32, u32, uint32_t) X(INT32, i32, i32, int32_t)       \
    X(FLOAT32, f32, f32, float) X(BOOL, bool, u8, uint8_t) X(UINT64, u64, u64, uint64_t)        \
    X(INT64, i64, i64, int64_t) X(FLOAT64, f64, f64, double)

/*
 * tern_gguf_kv_get_<type> (!array) or tern_gguf_kv_array_get_<type> (array, element i) for the
 * GGUF type `type`, a scalar or STRING (the Kotlin side passes no other). A scalar goes to
 * out[0] as its bits zero-extended to 64, a string as (address, length): see Bridge.ggufKvGet.
 */
static jint kv_value(JNIEnv *env, jlong g, jlong index, int array, jlong element, jint type, jlongArray out) {
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; float f32;
            uint64_t u64; int64_t i64; double f64; } v;
    const char *str = NULL;
    size_t len = 0, width = 0;
    tern_status s;
    memset(&v, 0, sizeof v);
    switch (type) {
#define GET(T, suffix, member, ctype)                                                                      \
    case TERN_GGUF_TYPE_##T:                                                                               \
        width = sizeof(ctype);                                                                             \
        s = !array ? tern_gguf_kv_get_##suffix(PTR(g), (size_t)index, &v.member)                      \
                   : tern_gguf_kv_array_get_##suffix(PTR(g), (size_t)index, (size_t)element, &v.member); \
        break;
        GGUF_SCALARS(GET)
#undef GET
    case TERN_GGUF_TYPE_STRING:
        s = !array ? tern_gguf_kv_get_str(PTR(g), (size_t)index, &str, &len)
                   : tern_gguf_kv_array_get_str(PTR(g), (size_t)index, (size_t)element, &str, &len);
        break;
    default:
        return TERN_ERR_INVALID_ARGUMENT;
    }
    if (width == 0) {
        jlong pair[2] = {JPTR(str), (jlong)len};
        return put(env, out, s, 2, pair);
    }
    return put1(env, out, s, (jlong)(width == 1 ? v.u8 : width == 2 ? v.u16 : width == 4 ? v.u32 : v.u64));
}

JNI_FN(jint, ggufKvGet)(JNIEnv *env, jobject self, jlong g, jlong index, jint type, jlongArray out) {
    (void)self;
    return kv_value(env, g, index, 0, 0, type, out);
}

JNI_FN(jint, ggufKvArrayGet)(JNIEnv *env, jobject self, jlong g, jlong index, jlong element, jint type,
                             jlongArray out) {
    (void)self;
    return kv_value(env, g, index, 1, element, type, out);
}
