/*
 * CRC-32C (Castagnoli), as Kafka's record batch v2 uses it.
 *
 * Every function takes the CRC of the bytes before `data` (0 to start) and
 * returns the CRC of those bytes followed by `data`; the pre- and
 * post-inversion happen inside. So
 *     kb_crc32c(0, "123456789", 9) == 0xE3069283
 *     kb_crc32c(kb_crc32c(0, a, n), b, m) == CRC of a followed by b.
 *
 * kb_crc32c() calls the active path: the fastest the CPU offers, chosen when
 * the library loads, or the one kb_crc32c_use() named since. The other entry
 * points name one path, so tests can compare them; call a hardware path only
 * when its *_available() says so. No function allocates or fails; only
 * kb_crc32c_use() changes state.
 */
#ifndef KB_CRC32C_H
#define KB_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The active path (hardware if the CPU has it, else software). */
uint32_t kb_crc32c(uint32_t crc, const void *data, size_t length);

/* Portable slicing-by-8 software path; works on every CPU. */
uint32_t kb_crc32c_sw(uint32_t crc, const void *data, size_t length);

/* The best hardware path the CPU has (x86-64 AVX-512, AVX2 or SSE4.2, or ARMv8
 * CRC32 + PMULL), whichever path is active; valid only if kb_crc32c_hw_available(). */
int kb_crc32c_hw_available(void);
uint32_t kb_crc32c_hw(uint32_t crc, const void *data, size_t length);

/* x86-64 SSE4.2 crc32 instruction, three interleaved streams combined with
 * PCLMULQDQ; valid only if kb_crc32c_sse42_available(). */
int kb_crc32c_sse42_available(void);
uint32_t kb_crc32c_sse42(uint32_t crc, const void *data, size_t length);

/* x86-64 VPCLMULQDQ folding on 256-bit registers with AVX2, for CPUs without
 * AVX-512 (AMD Zen 3); the SSE4.2 path for the rest. Valid only if
 * kb_crc32c_avx2_available(). */
int kb_crc32c_avx2_available(void);
uint32_t kb_crc32c_avx2(uint32_t crc, const void *data, size_t length);

/* x86-64 AVX-512 VPCLMULQDQ folding for large buffers (the SSE4.2 path for
 * the rest); valid only if kb_crc32c_avx512_available(). */
int kb_crc32c_avx512_available(void);
uint32_t kb_crc32c_avx512(uint32_t crc, const void *data, size_t length);

/* Name of the active path: "avx512-vpclmulqdq", "avx2-vpclmulqdq", "sse4.2",
 * "armv8-crc" or "software". */
const char *kb_crc32c_implementation(void);

/* Makes the path called `name` the active one (tests, benchmarks, and the
 * KBROKER_CRC32C_PATH environment variable). Returns 0, -1 if no path has that
 * name on this architecture, -2 if the CPU lacks its instructions. Calls in
 * flight on other threads finish on the path they started with. */
int kb_crc32c_use(const char *name);

/* The i-th path this build knows, best first (NULL past the last), and
 * whether the CPU has it; the active path at load is the first available. */
const char *kb_crc32c_path_name(size_t i);
int kb_crc32c_path_available(size_t i);

#ifdef __cplusplus
}
#endif

#endif /* KB_CRC32C_H */
